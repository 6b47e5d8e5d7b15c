import { type Database, LeaseLostError, leaseStates, renewLeasesOf } from '@agentvisor/store'
import { Clock, Duration, Effect } from 'effect'
import type { Kysely } from 'kysely'
import type { LeasePolicy } from './lease.js'

/** What the keeper tells a driver: stop, someone asked to cancel; or stop, the lease is gone. */
export interface LeaseEvents {
  readonly onCancelRequested: () => void
  readonly onLost: (error: LeaseLostError) => void
}

/** A driver's lease as the keeper watches it. */
interface Held extends LeaseEvents {
  readonly runId: string
  readonly token: number
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
        if (state === undefined || state.lease_token !== h.token) h.onLost(new LeaseLostError({ runId: h.runId }))
        else if (state.cancel_requested_at !== null) h.onCancelRequested()
      }
    })
    // A failed poll (the store busy for a moment) is tried again at the next tick.
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(Duration.millis(policy.pollMs)), Effect.ignore(tick))))

    /**
     * Watches one driver's lease until the returned function is called: `onLost` once another
     * driver took the run over, `onCancelRequested` when someone asked to cancel it (each may
     * come more than once; the first one counts).
     */
    const watch = (runId: string, token: number, events: LeaseEvents): (() => void) => {
      const key = `${runId}#${token}`
      held.set(key, { runId, token, ...events })
      return () => void held.delete(key)
    }

    return { watch }
  })

export type LeaseKeeper = Effect.Effect.Success<ReturnType<typeof makeLeaseKeeper>>
