import { type ModelPrice, priceOf, type StallSettings, type TaskContract, UsageTally } from '@agentvisor/core'
import {
  type AttemptRow,
  type Executor,
  getRunRow,
  isFinalStatus,
  listApprovals,
  listAttempts,
  listRuns,
  listSteps,
  listTransitions,
  runContracts,
  type StepRow,
  type StoreError
} from '@agentvisor/store'
import { Effect } from 'effect'
import { statusOfState } from '../machine/run-state.js'
import { noProgressWarning } from '../driver/stall.js'
import { storedOutput } from '../driver/conversation.js'
import { pendingRequestOf } from '../approval/pending-request.js'
import type { RunStreamEvent } from '../protocol/run-stream-event.js'

/** The events that answer a dispatch: each settles the step's next receipt. */
const ANSWERS: ReadonlySet<string> = new Set(['PROVIDER_OK', 'PROVIDER_ERROR', 'CIRCUIT_OPEN', 'DISPATCH_LOST'])
/** The events that end a dispatch without an answer: its receipt settles `cancelled` (or `unknown`). */
const INTERRUPTIONS: ReadonlySet<string> = new Set(['CANCEL', 'TIMEOUT', 'FAIL'])

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

/**
 * The durable events of the transitions recorded since the cursor, in order, and the cursor moved
 * past them. Reads only the rows of the steps from the cursor's on.
 */
export const readEvents = (db: Executor, cursor: EventCursor): Effect.Effect<RunStreamEvent[], StoreError> =>
  Effect.gen(function* () {
    const { runId } = cursor
    const transitions = yield* listTransitions(db, runId, cursor.nextSeq)
    if (transitions.length === 0) return []
    const fromStep = cursor.step
    const [attempts, steps, approvals, children] = yield* Effect.all(
      [listAttempts(db, runId, fromStep), listSteps(db, runId, fromStep), listApprovals(db, runId, undefined, fromStep), listRuns(db, { parentId: runId })],
      { concurrency: 'unbounded' }
    )
    const attemptOf = (step: number, n: number): AttemptRow | undefined => attempts.find((a) => a.step === step && a.attempt === n)
    const stepOf = (step: number): StepRow | undefined => steps.find((s) => s.step === step)
    const out: RunStreamEvent[] = []
    for (const t of transitions) {
      const seq = t.seq
      const at = t.at
      const emit = seq >= cursor.fromSeq
      const push = (event: RunStreamEvent): void => {
        if (emit) out.push(event)
      }
      const answer = t.from_state === 'dispatching' && (ANSWERS.has(t.event) || INTERRUPTIONS.has(t.event))
      // The answer's text, whole, where its streamed pieces would have come (before its transition),
      // unless this reader heard them (docs/streaming.md, "Text").
      const heard = answer && cursor.heardText.delete(textKey(cursor.step, cursor.attempt))
      if (t.event === 'PROVIDER_OK' && answer && !heard) {
        const step = stepOf(cursor.step)
        if (step !== undefined && step.text !== '') push({ kind: 'text', runId, at: step.at, step: cursor.step, attempt: cursor.attempt, delta: step.text })
      }
      push({ kind: 'transition', runId, seq, at, from: t.from_state, event: t.event, to: t.to_state })
      if (answer) {
        const row = attemptOf(cursor.step, cursor.attempt)
        if (row !== undefined && row.outcome !== 'pending') push(attemptEvent(runId, seq, row))
        if (ANSWERS.has(t.event)) cursor.attempt++
        if (t.event === 'PROVIDER_OK') {
          cursor.completedSteps++
          if (row !== undefined) cursor.tally.add(cursor.prices.get(row.provider), row.tokens_in ?? 0, row.tokens_out ?? 0)
          for (const call of stepOf(cursor.step)?.tool_calls ?? []) {
            push({ kind: 'toolCall', runId, seq, at, step: cursor.step, callId: call.id, name: call.name, arguments: parsed(call.arguments) })
          }
          push({ kind: 'usage', runId, seq, at, usage: cursor.tally.usage })
        }
      }
      if (t.event === 'TOOLS_DONE') {
        const step = stepOf(cursor.step)
        for (const result of step?.results ?? []) {
          const name = step?.tool_calls.find((call) => call.id === result.toolCallId)?.name ?? ''
          push({ kind: 'toolResult', runId, seq, at, step: cursor.step, callId: result.toolCallId, name, output: result.output })
          if (result.stall !== undefined) push(stallWarned(runId, seq, at, cursor.step, result.stall, result.stall === 'repeat' ? name : undefined))
        }
      }
      if (t.event === 'APPROVAL_REQUESTED' || t.event === 'INPUT_REQUESTED') {
        const questions = t.event === 'INPUT_REQUESTED'
        for (const row of approvals) {
          if (row.step !== cursor.step || cursor.approvals.has(row.id) || (row.kind === 'input') !== questions) continue
          cursor.approvals.add(row.id)
          push({ kind: questions ? 'inputRequested' : 'approvalRequested', runId, seq, at, request: pendingRequestOf(row) })
        }
      }
      if (t.event === 'CHILDREN_SPAWNED') {
        for (const child of children) {
          if (cursor.childrenStarted.has(child.id)) continue
          cursor.childrenStarted.add(child.id)
          push({ kind: 'child', runId, seq, at, childId: child.id, goal: child.goal, status: 'running' })
        }
      }
      if (t.event === 'CHILDREN_DONE') {
        for (const child of children) {
          if (!cursor.childrenStarted.has(child.id) || cursor.childrenEnded.has(child.id) || !isFinalStatus(child.status)) continue
          cursor.childrenEnded.add(child.id)
          push({ kind: 'child', runId, seq, at, childId: child.id, goal: child.goal, status: child.status })
        }
      }
      if (t.event === 'FOLLOW_UP') {
        // A new turn of a finished run: its first step follows the steps answered so far.
        cursor.step = cursor.completedSteps + 1
        cursor.attempt = 0
        cursor.ended = false
      }
      if (t.event === 'VERIFY_FAILED' && cursor.stall !== undefined && stepOf(cursor.step)?.feedback?.endsWith(noProgressWarning(cursor.stall))) {
        push(stallWarned(runId, seq, at, cursor.step, 'noProgress', undefined))
      }
      if (t.event === 'VERIFY_FAILED' && t.to_state === 'dispatching') {
        cursor.step++
        cursor.attempt = 0
      }
      if (t.to_state.startsWith('finished.')) {
        cursor.ended = true
        const status = statusOfState(t.to_state)
        const run = yield* getRunRow(db, runId)
        // The turn's own last answer: a later turn's steps may already be in the rows read.
        const output = status === 'succeeded' ? storedOutput(steps.filter((s) => s.step <= cursor.completedSteps)) : undefined
        if (run?.error?.kind === 'stalled') push({ kind: 'stall', runId, seq, at, step: cursor.step, phase: 'stalled', message: run.error.message })
        push({
          kind: 'done',
          runId,
          seq,
          at,
          status,
          steps: cursor.completedSteps,
          ...(output !== undefined ? { output } : {}),
          usage: cursor.tally.usage,
          ...(run?.error != null ? { error: run.error } : {})
        })
      }
      cursor.nextSeq = seq + 1
    }
    return out
  })

const stallWarned = (runId: string, seq: number, at: string, step: number, rule: 'repeat' | 'noProgress', name: string | undefined): RunStreamEvent => ({
  kind: 'stall',
  runId,
  seq,
  at,
  step,
  phase: 'warned',
  rule,
  ...(name !== undefined ? { name } : {}),
  message:
    rule === 'repeat'
      ? `${name ?? 'a call'}: the same call reached limits.stall.repeats; one more ends the run`
      : 'limits.stall.window steps without progress; one more ends the run'
})

const attemptEvent = (runId: string, seq: number, row: AttemptRow): RunStreamEvent => ({
  kind: 'attempt',
  runId,
  seq,
  at: row.settled_at ?? row.started_at,
  step: row.step,
  attempt: row.attempt,
  provider: row.provider,
  reason: row.reason,
  outcome: row.outcome,
  ...(row.error_kind !== null ? { errorKind: row.error_kind } : {}),
  ...(row.http_status !== null ? { httpStatus: row.http_status } : {}),
  ...(row.latency_ms !== null ? { latencyMs: row.latency_ms } : {}),
  ...(row.tokens_in !== null ? { tokensIn: row.tokens_in } : {}),
  ...(row.tokens_out !== null ? { tokensOut: row.tokens_out } : {})
})

/** Tool-call arguments as JSON when they parse, else the raw text the model sent. */
const parsed = (raw: string): unknown => {
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}
