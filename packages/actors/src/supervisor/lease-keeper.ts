import { type Database, LeaseLostError, type LeaseState, leaseStates, renewLeasesOf, type StoreError } from '@agentvisor/store'
import { Cause, Clock, Duration, Effect, Schedule, type Scope } from 'effect'
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

/** The two queries the keeper makes; the store's by default, a failing double in tests. */
export interface LeaseQueries {
  readonly renew: (owner: string, expiresAt: number) => Effect.Effect<unknown, StoreError>
  readonly states: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<LeaseState>, StoreError>
}

export const storeLeaseQueries = (db: Kysely<Database>): LeaseQueries => ({
  renew: (owner, expiresAt) => renewLeasesOf(db, owner, expiresAt),
  states: (ids) => leaseStates(db, ids)
})

/** A failed query as the keeper's log line names it: what the keeper was doing, and the store's cause. */
const failedAt =
  (what: string) =>
  (error: StoreError): string => {
    const cause = error.cause ?? error
    return `lease keeper: ${what} failed: ${cause instanceof Error ? cause.message : String(cause)}`
  }

const reasonOf = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!
}

/** The one keeper of a supervisor's leases: each run's lease renewed, its cancel and loss heard. */
export interface LeaseKeeper {
  /** Keeps `runId`'s lease (held with `token`) and tells `events` of it; the answer stops watching. */
  readonly watch: (runId: string, token: number, events: LeaseEvents) => () => void
}

/**
 * Keeps the leases of every run one supervisor drives: one fiber renews them all with one
 * statement every third of the lease, and polls them all with one query every `pollMs` for a
 * takeover (the driver must stop) or a cancel request written by another process. A thousand
 * runs cost the same two queries as one, where a watcher per run cost a thousand.
 *
 * The loop outlives any failure: a failed query (the store busy or unreachable for a while) is
 * logged once, with its cause, and tried again at the next tick; its recovery is logged too.
 */
export const makeLeaseKeeper = (
  queries: LeaseQueries,
  owner: string,
  policy: LeasePolicy,
  log: (line: string) => void
): Effect.Effect<LeaseKeeper, never, Scope.Scope> =>
  Effect.gen(function* () {
    const held = new Map<string, Held>()
    let renewedAt = yield* Clock.currentTimeMillis
    let failing = false

    const tick = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (held.size === 0) {
        renewedAt = now
        return
      }
      if (now - renewedAt >= policy.ttlMs / 3) {
        yield* Effect.mapError(queries.renew(owner, now + policy.ttlMs), failedAt('renewing leases'))
        renewedAt = now
      }
      const watched = [...held.values()]
      const polled = yield* Effect.mapError(queries.states([...new Set(watched.map((h) => h.runId))]), failedAt('polling leases'))
      const states = new Map(polled.map((s) => [s.id, s]))
      for (const h of watched) {
        const state = states.get(h.runId)
        if (state === undefined || state.lease_token !== h.token) h.onLost(new LeaseLostError({ runId: h.runId }))
        else if (state.cancel_requested_at !== null) h.onCancelRequested()
      }
    })
    const guarded = tick.pipe(
      Effect.matchCauseEffect({
        onFailure: (cause) =>
          Effect.sync(() => {
            if (!failing) log(`${reasonOf(cause)}; trying again every ${policy.pollMs} ms`)
            failing = true
          }),
        onSuccess: () =>
          Effect.sync(() => {
            if (failing) log('lease keeper: the store answers again')
            failing = false
          })
      })
    )
    yield* Effect.forkScoped(Effect.repeat(guarded, Schedule.spaced(Duration.millis(policy.pollMs))).pipe(Effect.delay(Duration.millis(policy.pollMs))))

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
