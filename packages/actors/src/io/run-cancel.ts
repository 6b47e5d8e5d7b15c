import { type Database, getRunRow, isAbandonedOwner, isFinalStatus, requestCancel, type RunStatus, type StoreError } from '@agentvisor/store'
import { Clock, Effect } from 'effect'
import type { Kysely } from 'kysely'
import { RunNotFoundError } from '../errors.js'

// The store's side of a cancel (docs/durability.md), below every layer that asks for one: the
// cancel use case, the control handler, the child runs of the loop and spawn from code.

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
    const run = yield* getRunRow(db, runId)
    if (run === undefined) return yield* new RunNotFoundError({ runId })
    if (isFinalStatus(run.status)) return { runId, status: run.status, alreadyEnded: true, undriven: false }
    const now = yield* Clock.currentTimeMillis
    yield* requestCancel(db, runId, new Date(now).toISOString())
    return { runId, status: run.status, alreadyEnded: false, undriven: isUndriven(run, now) }
  })
