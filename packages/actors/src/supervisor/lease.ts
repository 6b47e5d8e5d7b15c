import { isAbandonedOwner, LeaseConflictError, type LeaseLostError, type RunWriter, type StoreError } from '@agentvisor/store'
import { Cause, Chunk, Clock, Effect } from 'effect'
import { RunNotFoundError } from '../errors.js'

/** How long a driver's lease lasts without renewal, and how often cancel requests are polled. */
export interface LeasePolicy {
  readonly ttlMs: number
  readonly pollMs: number
}

export const DEFAULT_LEASE_POLICY: LeasePolicy = { ttlMs: 15_000, pollMs: 250 }

export { isOwnedByThisProcess, makeLeaseOwner } from '@agentvisor/store'

/** Takes a run's lease or fails with the live holder (`LeaseConflictError`). Returns the fencing token. */
export const takeLease = (
  writer: RunWriter,
  runId: string,
  owner: string,
  policy: LeasePolicy
): Effect.Effect<number, LeaseConflictError | LeaseLostError | RunNotFoundError | StoreError> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const result = yield* writer.acquireLease({ runId, owner, now, ttlMs: policy.ttlMs, isAbandoned: isAbandonedOwner })
    if (result === undefined) return yield* new RunNotFoundError({ runId })
    if ('holder' in result) return yield* new LeaseConflictError({ runId, owner: result.holder.owner, expiresAt: result.holder.expiresAt })
    return result.token
  })

/** Gives the lease up once the driver stops (finished, paused, or cancelled). */
export const dropLease = (writer: RunWriter, runId: string, token: number, usageJson?: string): Effect.Effect<void> =>
  Effect.ignore(writer.releaseLease(runId, token, usageJson))

/** Another live driver holds the run: it is that driver's to move, nothing went wrong. */
export const isLeaseConflict = (cause: Cause.Cause<unknown>): boolean => Cause.failures(cause).pipe(Chunk.some((error) => error instanceof LeaseConflictError))
