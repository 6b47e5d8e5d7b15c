import { type Database, LeaseLostError, leaseStates, renewLeasesOf } from '@agentvisor/store'
import { Clock, Deferred, Duration, Effect, Exit, FiberId } from 'effect'
import type { Kysely } from 'kysely'
import type { LeasePolicy } from './lease.js'

/** A driver's lease as the keeper watches it. */
interface Held {
  readonly runId: string
  readonly token: number
  readonly cancelled: Deferred.Deferred<void>
  readonly lost: Deferred.Deferred<never, LeaseLostError>
}

/**
 * Keeps the leases of every run one supervisor drives: one fiber renews them all with one
 * statement every third of the lease, and polls them all with one query every `pollMs` for a
 * takeover (the driver must stop) or a cancel request written by another process. A thousand
 * runs cost the same two queries as one, where a watcher per run cost a thousand.
 */
export const makeLeaseKeeper = (db: Kysely<Database>, owner: string, policy: LeasePolicy) =>
  Effect.gen(function* () {
    const held = new Map<string, Held>()
    let renewedAt = yield* Clock.currentTimeMillis

    const tick = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (held.size === 0) {
        renewedAt = now
        return
      }
      if (now - renewedAt >= policy.ttlMs / 3) {
        yield* Effect.promise(() => renewLeasesOf(db, owner, now + policy.ttlMs))
        renewedAt = now
      }
      const watched = [...held.values()]
      const states = new Map((yield* Effect.promise(() => leaseStates(db, [...new Set(watched.map((h) => h.runId))]))).map((s) => [s.id, s]))
      for (const h of watched) {
        const state = states.get(h.runId)
        if (state === undefined || state.lease_token !== h.token) {
          Deferred.unsafeDone(h.lost, Exit.fail(new LeaseLostError({ runId: h.runId })))
        } else if (state.cancel_requested_at !== null) {
          Deferred.unsafeDone(h.cancelled, Exit.void)
        }
      }
    })
    // A failed poll (the store busy for a moment) is tried again at the next tick.
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(Duration.millis(policy.pollMs)), Effect.ignore(tick))))

    /**
     * Watches one driver's lease for as long as it drives: fails with `LeaseLostError` once
     * another driver took the run over, and completes `cancelled` when a cancel is requested.
     */
    const watch = (runId: string, token: number, cancelled: Deferred.Deferred<void>): Effect.Effect<never, LeaseLostError> =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          const entry: Held = { runId, token, cancelled, lost: Deferred.unsafeMake<never, LeaseLostError>(FiberId.none) }
          held.set(`${runId}#${token}`, entry)
          return entry
        }),
        (entry) => Deferred.await(entry.lost),
        () => Effect.sync(() => held.delete(`${runId}#${token}`))
      )

    return { watch }
  })

export type LeaseKeeper = Effect.Effect.Success<ReturnType<typeof makeLeaseKeeper>>
