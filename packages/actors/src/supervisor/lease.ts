import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import {
  acquireLease,
  type Database,
  isAbandonedOwner,
  isCancelRequested,
  LeaseConflictError,
  LeaseLostError,
  releaseLease,
  renewLease,
  StoreError
} from '@agentvisor/store'
import { Clock, Deferred, Duration, Effect } from 'effect'
import type { Kysely } from 'kysely'
import { RunNotFoundError } from '../errors.js'
import { store } from './driver-io.js'

/** How long a driver's lease lasts without renewal, and how often cancel requests are polled. */
export interface LeasePolicy {
  readonly ttlMs: number
  readonly pollMs: number
}

export const DEFAULT_LEASE_POLICY: LeasePolicy = { ttlMs: 15_000, pollMs: 250 }

/** A lease owner name for this process: `host/pid/nonce` (the nonce tells two supervisors apart). */
export const makeLeaseOwner = (): string => `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`

/** Takes a run's lease or fails with the live holder (`LeaseConflictError`). Returns the fencing token. */
export const takeLease = (
  db: Kysely<Database>,
  runId: string,
  owner: string,
  policy: LeasePolicy
): Effect.Effect<number, LeaseConflictError | LeaseLostError | RunNotFoundError | StoreError> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const result = yield* store('take the lease', () => acquireLease(db, { runId, owner, now, ttlMs: policy.ttlMs, isAbandoned: isAbandonedOwner }))
    if (result === undefined) return yield* new RunNotFoundError({ runId })
    if ('holder' in result) return yield* new LeaseConflictError({ runId, owner: result.holder.owner, expiresAt: result.holder.expiresAt })
    return result.token
  })

/**
 * Runs beside a driver for as long as it drives: renews the lease (failing with
 * `LeaseLostError` when another driver took it over) and turns a cancel request written to the
 * store by any process (`agentvisor cancel`) into the run's cancel signal.
 */
export const watchLease = (
  db: Kysely<Database>,
  runId: string,
  token: number,
  policy: LeasePolicy,
  cancelled: Deferred.Deferred<void>
): Effect.Effect<never, LeaseLostError | StoreError> =>
  Effect.gen(function* () {
    let renewedAt = yield* Clock.currentTimeMillis
    for (;;) {
      yield* Effect.sleep(Duration.millis(policy.pollMs))
      const now = yield* Clock.currentTimeMillis
      if (now - renewedAt >= policy.ttlMs / 3) {
        const renewed = yield* store('renew the lease', () => renewLease(db, runId, token, now + policy.ttlMs))
        if (!renewed) return yield* new LeaseLostError({ runId })
        renewedAt = now
      }
      if (yield* store('poll for cancel', () => isCancelRequested(db, runId))) {
        yield* Deferred.succeed(cancelled, undefined)
      }
    }
  })

/** Gives the lease up once the driver stops (finished, paused, or cancelled). */
export const dropLease = (db: Kysely<Database>, runId: string, token: number): Effect.Effect<void> =>
  Effect.promise(() => releaseLease(db, runId, token)).pipe(Effect.ignore)

