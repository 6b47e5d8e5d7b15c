import type { RunError, TaskContract } from '@agentvisor/core'
import {
  type ApprovalRow,
  type Executor,
  getRun,
  isFinalStatus,
  type JournalEntryRow,
  type JournalTransition,
  listApprovals,
  listJournalEntries,
  listPolicyEvents,
  listSteps,
  type PolicyEventRow,
  type RunStatus,
  type StepRow,
  type StoreError
} from '@agentvisor/store'
import { Effect, Either } from 'effect'
import { ReplayRefusedError, RunNotFoundError } from '../errors.js'
import { isFinalPath, statusOfState } from '../machine/run-state.js'

/** One turn of a recorded run: its first, then one per follow-up (docs/replay.md, "Turns"). */
export interface RecordedTurn {
  /** Its first step (1 for the first turn). */
  readonly firstStep: number
  /** Its last step: the one before the next turn's first, or the run's last (firstStep - 1 when it had none). */
  readonly lastStep: number
  /** The follow-up message that began it (`agentvisor send`); none for the first turn. */
  readonly message?: string | undefined
  /** How it ended: the state the next turn began from, or the run's status for the last one. */
  readonly status: RunStatus
  /** The kind of the error it ended with, when it failed (or was cancelled, timed out). */
  readonly errorKind?: string | undefined
}

/**
 * What a replay needs of a stored run (docs/replay.md): its contract, the model's answers (every
 * step of every turn), the follow-ups that began its turns, the decisions and answers people
 * gave, and what came of it.
 */
export interface Recording {
  readonly runId: string
  readonly status: RunStatus
  readonly error: RunError | undefined
  readonly contract: TaskContract
  /** Every step of the run, in order, across its turns. */
  readonly steps: ReadonlyArray<StepRow>
  /** Its turns in order: one for a run no follow-up continued. */
  readonly turns: ReadonlyArray<RecordedTurn>
  readonly policyEvents: ReadonlyArray<PolicyEventRow>
  readonly approvals: ReadonlyArray<ApprovalRow>
}

/**
 * Loads a run's recording. With `endedOnly` (the default), refuses a run that has not ended: a
 * paused run is replayed once it is decided and done.
 */
export const loadRecording = (
  db: Executor,
  runId: string,
  options: { readonly endedOnly?: boolean } = {}
): Effect.Effect<Recording, RunNotFoundError | ReplayRefusedError | StoreError> =>
  Effect.gen(function* () {
    const run = yield* getRun(db, runId)
    if (run === undefined) return yield* new RunNotFoundError({ runId })
    if (options.endedOnly !== false && !isFinalStatus(run.status)) {
      return yield* new ReplayRefusedError({ runId, reason: `it has not ended (${run.status}): replay replays ended runs` })
    }
    const [steps, entries, policyEvents, approvals] = yield* Effect.all(
      [listSteps(db, runId), listJournalEntries(db, runId), listPolicyEvents(db, runId), listApprovals(db, runId)],
      { concurrency: 'unbounded' }
    )
    const turns = turnsOf(entries, run.status, run.error ?? undefined, steps.length)
    if (Either.isLeft(turns)) return yield* new ReplayRefusedError({ runId, reason: turns.left })
    return {
      runId,
      status: run.status,
      error: run.error ?? undefined,
      contract: run.contract,
      steps,
      turns: turns.right,
      policyEvents,
      approvals
    }
  })

/**
 * The turns of a run, read from its journal: each `FOLLOW_UP` ends the turn before it (in the
 * state it leaves) and begins one with its message, after the steps answered so far.
 */
const turnsOf = (
  entries: ReadonlyArray<JournalEntryRow>,
  status: RunStatus,
  error: RunError | undefined,
  stepCount: number
): Either.Either<RecordedTurn[], string> => {
  const turns: RecordedTurn[] = []
  let firstStep = 1
  let message: string | undefined
  let answered = 0
  // The kind of the error the last `finished.*` state was entered with, when its event carries one.
  let endedWith: string | undefined
  for (const entry of entries) {
    let transitions: ReadonlyArray<JournalTransition>
    try {
      transitions = JSON.parse(entry.transitions_json) as ReadonlyArray<JournalTransition>
    } catch {
      return Either.left(`its journal entry at seq ${entry.seq} does not read (docs/durability.md, "Corrupt rows")`)
    }
    for (const t of transitions) {
      if (t.event.type === 'PROVIDER_OK') answered++
      if (isFinalPath(t.to) && !isFinalPath(t.from)) endedWith = errorKindOf(t.event)
      if (t.event.type !== 'FOLLOW_UP') continue
      if (typeof t.event['text'] !== 'string') return Either.left(`the message of its follow-up at seq ${t.seq} is not recorded`)
      turns.push({ firstStep, lastStep: answered, message, status: statusOfState(t.from), errorKind: endedWith })
      firstStep = answered + 1
      message = t.event['text']
      endedWith = undefined
    }
  }
  turns.push({ firstStep, lastStep: stepCount, message, status, errorKind: error?.kind })
  return Either.right(turns)
}

const errorKindOf = (event: JournalTransition['event']): string | undefined => {
  const error = event['error']
  return typeof error === 'object' && error !== null && typeof (error as { kind?: unknown }).kind === 'string' ? (error as { kind: string }).kind : undefined
}
