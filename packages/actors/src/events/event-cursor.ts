import { type ModelPrice, priceOf, type StallSettings, type TaskContract, UsageTally } from '@agentvisor/core'
import { type Executor, runContracts } from '@agentvisor/store'
import { Effect } from 'effect'

/**
 * Where a reader of a run's events stands: the next transition to read and what the run's
 * transitions so far imply (the step and attempt the next answer belongs to, the usage). Walked
 * from the first transition, whatever seq the reader starts at, so that a step's number and its
 * receipts are the same in every reading.
 */
export interface EventCursor {
  readonly runId: string
  /** Events of transitions before this one are not yielded. */
  readonly fromSeq: number
  nextSeq: number
  step: number
  attempt: number
  completedSteps: number
  readonly tally: UsageTally
  readonly prices: ReadonlyMap<string, ModelPrice | undefined>
  readonly approvals: Set<string>
  readonly childrenStarted: Set<string>
  readonly childrenEnded: Set<string>
  /** The run's stall settings, when its contract has them: its feedback's warnings are told by them. */
  readonly stall: StallSettings | undefined
  /** The run reached a final state: nothing follows. */
  ended: boolean
  /**
   * The calls (`textKey`) whose text this reader heard as it streamed: their answers' text is not
   * yielded again from the store. Filled by whoever hands the reader live text; emptied as read.
   */
  readonly heardText: Set<string>
}

/** A call's key among the texts a reader heard. */
export const textKey = (step: number, attempt: number): string => `${step}/${attempt}`

/** A cursor at the start of a run, yielding from `fromSeq` (1: everything). Prices from its contract, when it reads. */
export const eventCursor = (db: Executor, runId: string, fromSeq = 1, heardText: Set<string> = new Set()): Effect.Effect<EventCursor> =>
  Effect.map(
    runContracts(db, [runId]).pipe(
      Effect.map((found) => found.get(runId)),
      Effect.orElseSucceed(() => undefined)
    ),
    (contract) => cursorOf(runId, fromSeq, heardText, contract)
  )

const cursorOf = (runId: string, fromSeq: number, heardText: Set<string>, contract: TaskContract | undefined): EventCursor => {
  const prices = new Map<string, ModelPrice | undefined>()
  for (const provider of contract?.providers ?? []) prices.set(provider.name, priceOf(contract?.pricing, provider))
  return {
    runId,
    fromSeq: Math.max(1, fromSeq),
    nextSeq: 1,
    step: 1,
    attempt: 0,
    completedSteps: 0,
    tally: new UsageTally(contract?.pricing !== undefined),
    prices,
    approvals: new Set(),
    childrenStarted: new Set(),
    childrenEnded: new Set(),
    stall: contract?.limits.stall,
    ended: false,
    heardText
  }
}
