import { type Database, getRunRow, isFinalStatus, type RunStatus, type StoreError } from '@agentvisor/store'
import { Clock, Duration, Effect } from 'effect'
import type { Kysely } from 'kysely'
import { CancelTimeoutError, RunNotFoundError } from '../errors.js'
import { isUndriven, requestRunCancel } from '../io/run-cancel.js'
import type { LaunchError, RunResult } from '../supervisor/run-handle.js'

/** How a cancel went: the run's status at the end, and whether it had ended before the request. */
export interface CancelOutcome {
  readonly runId: string
  readonly status: RunStatus
  /** The run had already ended: nothing was requested. */
  readonly alreadyEnded: boolean
}

export interface CancelDeps {
  readonly db: Kysely<Database>
  /**
   * Drives a run here until it ends or pauses: for a run whose cancel is requested, that writes
   * only its final transition. Fails with `LeaseConflictError` when another driver took it meanwhile.
   */
  readonly resume: (runId: string) => Effect.Effect<RunResult, LaunchError>
}

export interface CancelOptions {
  /** How long to wait for a live driver to end the run (default 10 s). */
  readonly waitMs?: number | undefined
  /** How often the store is read meanwhile (default 100 ms). */
  readonly pollMs?: number | undefined
}

export const DEFAULT_CANCEL_WAIT_MS = 10_000

/**
 * Cancels a run wherever it is driven: the request goes to the store; a run nobody drives is
 * ended here; a run driven elsewhere is waited for, up to `waitMs` (then `CancelTimeoutError`,
 * the request staying recorded). `agentvisor cancel` and `Agentvisor.cancel` are this.
 */
export const cancelRun = (
  deps: CancelDeps,
  runId: string,
  options: CancelOptions = {}
): Effect.Effect<CancelOutcome, RunNotFoundError | StoreError | CancelTimeoutError | Exclude<LaunchError, { readonly _tag: 'LeaseConflictError' }>> =>
  Effect.gen(function* () {
    const requested = yield* requestRunCancel(deps.db, runId)
    if (requested.alreadyEnded) return { runId, status: requested.status, alreadyEnded: true }
    const waitMs = options.waitMs ?? DEFAULT_CANCEL_WAIT_MS
    const until = (yield* Clock.currentTimeMillis) + waitMs
    let undriven = requested.undriven
    for (;;) {
      if (undriven) {
        // A driver that took the run between the read and now ends it itself: wait for it.
        const ended = yield* deps.resume(runId).pipe(
          Effect.map((result): RunStatus | undefined => result.status),
          Effect.catchTag('LeaseConflictError', () => Effect.succeed(undefined))
        )
        if (ended !== undefined) return { runId, status: ended, alreadyEnded: false }
      }
      const run = yield* getRunRow(deps.db, runId)
      if (run === undefined) return yield* new RunNotFoundError({ runId })
      if (isFinalStatus(run.status)) return { runId, status: run.status, alreadyEnded: false }
      const now = yield* Clock.currentTimeMillis
      if (now > until) return yield* new CancelTimeoutError({ runId, waitedMs: waitMs })
      undriven = isUndriven(run, now)
      yield* Effect.sleep(Duration.millis(options.pollMs ?? 100))
    }
  })
