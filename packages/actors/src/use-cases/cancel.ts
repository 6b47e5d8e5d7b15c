import { type Database, getRunRow, isAbandonedOwner, isFinalStatus, requestCancel, type RunStatus, type StoreError } from '@agentvisor/store'
import { Clock, Duration, Effect } from 'effect'
import type { Kysely } from 'kysely'
import { CancelTimeoutError, RunNotFoundError } from '../errors.js'
import type { LaunchError, RunResult } from '../api/supervisor.js'
import { query } from '../io/store-query.js'

/** How a cancel went: the run's status at the end, and whether it had ended before the request. */
export interface CancelOutcome {
  readonly runId: string
  readonly status: RunStatus
  /** The run had already ended: nothing was requested. */
  readonly alreadyEnded: boolean
}

/** A recorded cancel request: the run's status then, and whether any live driver holds it. */
export interface CancelRequest {
  readonly runId: string
  readonly status: RunStatus
  readonly alreadyEnded: boolean
  /**
   * No live driver holds the run (paused, queued, or its driver gone): nobody else will write
   * its final transition, so whoever cancels must end it (docs/durability.md).
   */
  readonly undriven: boolean
}

/** Whether a run row has no live lease: none, an expired one, or one of a dead process of this host. */
export const isUndriven = (run: { readonly lease_owner: string | null; readonly lease_expires_at: number | null }, now: number): boolean =>
  run.lease_owner === null || run.lease_expires_at === null || run.lease_expires_at <= now || isAbandonedOwner(run.lease_owner)

/**
 * Records a cancel request in the store, where the run's driver, in any process, hears of it
 * through its lease keeper. A run that already ended is left as it is.
 */
export const requestRunCancel = (db: Kysely<Database>, runId: string): Effect.Effect<CancelRequest, RunNotFoundError | StoreError> =>
  Effect.gen(function* () {
    const run = yield* query(`load run ${runId}`, () => getRunRow(db, runId))
    if (run === undefined) return yield* new RunNotFoundError({ runId })
    if (isFinalStatus(run.status)) return { runId, status: run.status, alreadyEnded: true, undriven: false }
    const now = yield* Clock.currentTimeMillis
    yield* query(`request a cancel of run ${runId}`, () => requestCancel(db, runId, new Date(now).toISOString()))
    return { runId, status: run.status, alreadyEnded: false, undriven: isUndriven(run, now) }
  })

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
      const run = yield* query(`load run ${runId}`, () => getRunRow(deps.db, runId))
      if (run === undefined) return yield* new RunNotFoundError({ runId })
      if (isFinalStatus(run.status)) return { runId, status: run.status, alreadyEnded: false }
      const now = yield* Clock.currentTimeMillis
      if (now > until) return yield* new CancelTimeoutError({ runId, waitedMs: waitMs })
      undriven = isUndriven(run, now)
      yield* Effect.sleep(Duration.millis(options.pollMs ?? 100))
    }
  })
