import type { RunError, TaskContract } from '@agentvisor/core'
import {
  type ApprovalRow,
  type Executor,
  getRun,
  isFinalStatus,
  listApprovals,
  listPolicyEvents,
  listSteps,
  listTransitions,
  type PolicyEventRow,
  type RunStatus,
  type StepRow,
  type StoreError
} from '@agentvisor/store'
import { Effect } from 'effect'
import { ReplayRefusedError, RunNotFoundError } from '../errors.js'
import { query } from '../use-cases/store-query.js'

/**
 * What a replay needs of a stored run (docs/replay.md): its contract, the model's answers (the
 * steps of its first turn), the decisions and answers people gave, and what came of it.
 */
export interface Recording {
  readonly runId: string
  readonly status: RunStatus
  readonly error: RunError | undefined
  readonly contract: TaskContract
  /** The steps of the run's first turn, in order (a follow-up's steps are not replayed). */
  readonly steps: ReadonlyArray<StepRow>
  /** Whether follow-ups continued the run past its first turn (its end is then not compared). */
  readonly followedUp: boolean
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
    const run = yield* query(`load run ${runId}`, () => getRun(db, runId))
    if (run === undefined) return yield* new RunNotFoundError({ runId })
    if (options.endedOnly !== false && !isFinalStatus(run.status)) {
      return yield* new ReplayRefusedError({ runId, reason: `it has not ended (${run.status}): replay replays ended runs` })
    }
    const [steps, transitions, policyEvents, approvals] = yield* query(`load run ${runId}'s record`, () =>
      Promise.all([listSteps(db, runId), listTransitions(db, runId), listPolicyEvents(db, runId), listApprovals(db, runId)])
    )
    // A follow-up starts a new turn: its steps answer a message the first turn never had.
    let answered = 0
    let followedUp = false
    for (const t of transitions) {
      if (t.event === 'FOLLOW_UP') {
        followedUp = true
        break
      }
      if (t.event === 'PROVIDER_OK') answered++
    }
    const firstTurn = steps.filter((step) => step.step <= answered)
    return {
      runId,
      status: run.status,
      error: run.error ?? undefined,
      contract: run.contract,
      steps: firstTurn,
      followedUp,
      policyEvents: policyEvents.filter((e) => e.step <= answered),
      approvals: approvals.filter((a) => a.step <= answered)
    }
  })
