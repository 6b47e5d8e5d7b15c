import type { Effect } from 'effect/Effect'
import type { Executor } from '../executor.js'
import { dialectOf } from '../dialect.js'
import { LeaseLostError, type StoreError } from '../errors.js'
import { storeCall } from '../store-call.js'

/** Who holds a run's lease, when another driver does. */
export interface LeaseHolder {
  readonly owner: string
  readonly expiresAt: number
}

export type LeaseAcquisition = { readonly token: number } | { readonly holder: LeaseHolder }

/** Who asks for a run's lease, when, for how long, and how to tell a dead holder. */
export interface LeaseRequest {
  readonly runId: string
  readonly owner: string
  readonly now: number
  readonly ttlMs: number
  readonly isAbandoned: (owner: string) => boolean
}

/**
 * Takes a run's lease for `owner` when nobody holds it, it expired, or `isAbandoned` says its
 * holder is gone (a dead process on this host). Every acquisition bumps the fencing token, so
 * whatever a superseded driver still tries to write is refused. Undefined when there is no run.
 *
 * A read, the decision in JS (`isAbandoned` probes a process), then a compare-and-set on the
 * token that was read: of racing acquirers exactly one UPDATE matches. That holds on both
 * dialects: on SQLite writers are serialised; on PostgreSQL a concurrent UPDATE of the row waits
 * for the first to commit and then re-checks `lease_token` against the committed row, so it
 * matches nothing. The loser reads again and finds the winner holding the lease.
 */
export const acquireLease = (db: Executor, input: LeaseRequest): Effect<LeaseAcquisition | undefined, StoreError> =>
  storeCall(
    () => `take the lease of run ${input.runId}`,
    () => acquireLeaseAsync(db, input)
  )

/** `acquireLease` as a promise, for the Kysely writer (run-writer.ts). */
export async function acquireLeaseAsync(db: Executor, input: LeaseRequest): Promise<LeaseAcquisition | undefined> {
  const run = await db.selectFrom('runs').select(['lease_owner', 'lease_expires_at', 'lease_token']).where('id', '=', input.runId).executeTakeFirst()
  if (run === undefined) return undefined
  const held = run.lease_owner !== null && run.lease_expires_at !== null && run.lease_expires_at > input.now
  if (held && run.lease_owner !== input.owner && !input.isAbandoned(run.lease_owner!)) {
    return { holder: { owner: run.lease_owner!, expiresAt: run.lease_expires_at! } }
  }
  const token = run.lease_token + 1
  const result = await db
    .updateTable('runs')
    .set({ lease_owner: input.owner, lease_expires_at: input.now + input.ttlMs, lease_token: token })
    .where('id', '=', input.runId)
    .where('lease_token', '=', run.lease_token)
    .executeTakeFirst()
  // Someone acquired it between our read and our write: they hold it now.
  if (result.numUpdatedRows === 0n) return acquireLeaseAsync(db, input)
  return { token }
}

/** Extends the lease; false when it was taken over (the driver must stop). */
export const renewLease = (db: Executor, runId: string, token: number, expiresAt: number): Effect<boolean, StoreError> =>
  storeCall(
    () => `renew the lease of run ${runId}`,
    async () => {
      const result = await db
        .updateTable('runs')
        .set({ lease_expires_at: expiresAt })
        .where('id', '=', runId)
        .where('lease_token', '=', token)
        .executeTakeFirst()
      return result.numUpdatedRows > 0n
    }
  )

/**
 * Gives the lease up (when the run finishes or pauses), if this driver still holds it; with
 * `usageJson`, records the run's usage in the same statement.
 */
export const releaseLease = (db: Executor, runId: string, token: number, usageJson?: string): Effect<void, StoreError> =>
  storeCall(
    () => `release the lease of run ${runId}`,
    () => releaseLeaseAsync(db, runId, token, usageJson)
  )

/** `releaseLease` as a promise, for the Kysely writer (run-writer.ts). */
export async function releaseLeaseAsync(db: Executor, runId: string, token: number, usageJson?: string): Promise<void> {
  await db
    .updateTable('runs')
    .set({ lease_owner: null, lease_expires_at: null, ...(usageJson !== undefined ? { usage_json: usageJson } : {}) })
    .where('id', '=', runId)
    .where('lease_token', '=', token)
    .execute()
}

/**
 * Refuses a write of a superseded driver: call it inside the write's transaction, before the
 * writes. The check must hold until the commit, or a takeover could land between the check and
 * the commit and the old driver's writes would still go in after it.
 *
 * - SQLite: the store's transactions begin `IMMEDIATE`, so this transaction already holds the
 *   database's write lock and no `acquireLease` can commit before it does.
 * - PostgreSQL (READ COMMITTED): a plain read locks nothing, so the run's row is locked
 *   (`FOR NO KEY UPDATE`, the lock an UPDATE of non-key columns takes). A concurrent
 *   `acquireLease` then waits for this commit; or, if its UPDATE came first, this read waits for
 *   it and sees the new token. `NO KEY` lets other transactions still insert rows that reference
 *   the run (its children, a receipt) without waiting.
 */
export async function checkFence(db: Executor, runId: string, token: number): Promise<void> {
  const run = await db
    .selectFrom('runs')
    .select('lease_token')
    .where('id', '=', runId)
    .$if(dialectOf(db) === 'postgres', (query) => query.forNoKeyUpdate())
    .executeTakeFirst()
  if (run?.lease_token !== token) throw new LeaseLostError({ runId })
}

/** Records a cancel request for whichever process drives the run; false when there is no such run. */
export const requestCancel = (db: Executor, runId: string, at: string): Effect<boolean, StoreError> =>
  storeCall(
    () => `request a cancel of run ${runId}`,
    async () => {
      const result = await db
        .updateTable('runs')
        .set({ cancel_requested_at: at })
        .where('id', '=', runId)
        .where('cancel_requested_at', 'is', null)
        .executeTakeFirst()
      if (result.numUpdatedRows > 0n) return true
      return (await db.selectFrom('runs').select('id').where('id', '=', runId).executeTakeFirst()) !== undefined
    }
  )

/**
 * Forgets a finished run's cancel request, as a follow-up begins a new turn of it (the request
 * ended the last turn, not the next). A run still going keeps its request.
 */
export const clearCancelRequest = (db: Executor, runId: string): Effect<void, StoreError> =>
  storeCall(
    () => `clear run ${runId}'s cancel request`,
    async () => {
      await db
        .updateTable('runs')
        .set({ cancel_requested_at: null })
        .where('id', '=', runId)
        .where('status', 'in', ['succeeded', 'step_cap', 'failed', 'cancelled', 'timed_out'])
        .execute()
    }
  )

/** Whether someone asked to cancel the run. */
export const isCancelRequested = (db: Executor, runId: string): Effect<boolean, StoreError> =>
  storeCall(
    () => `read run ${runId}'s cancel request`,
    async () => {
      const run = await db.selectFrom('runs').select('cancel_requested_at').where('id', '=', runId).executeTakeFirst()
      return run?.cancel_requested_at != null
    }
  )
