import { Deferred, Effect, Exit, Scope } from 'effect'
import { describe, expect, it } from 'vitest'
import { type LeaseState, storeCall } from '@agentvisor/store'
import { type LeaseQueries, makeLeaseKeeper } from '../src/supervisor/lease-keeper.js'

const policy = { ttlMs: 60_000, pollMs: 5 }

/** Queries whose first `failures` polls fail the way a busy SQLite does, then answer `answer`. */
const flakyQueries = (failures: number, answer: LeaseState): LeaseQueries & { polls: () => number } => {
  let polls = 0
  return {
    renew: () => Effect.succeed(1),
    states: () =>
      storeCall('read the leases', () => {
        polls += 1
        if (polls <= failures) throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })
        return [answer]
      }),
    polls: () => polls
  }
}

const withKeeper = <A>(
  queries: LeaseQueries,
  log: (line: string) => void,
  use: (keeper: { watch: (runId: string, token: number, events: { onCancelRequested: () => void; onLost: () => void }) => () => void }) => Effect.Effect<A>
) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const keeper = yield* Scope.extend(makeLeaseKeeper(queries, 'owner-1', policy, log), scope)
      const result = yield* use(keeper)
      yield* Scope.close(scope, Exit.void)
      return result
    })
  )

describe('the lease keeper', () => {
  it('goes on polling after a failed store query, logs its cause once, and still delivers a cancel', async () => {
    const queries = flakyQueries(3, { id: 'run-1', lease_owner: 'owner-1', lease_token: 7, cancel_requested_at: '2026-12-01T00:00:00.000Z' })
    const lines: string[] = []
    const outcome = await withKeeper(
      queries,
      (line) => lines.push(line),
      (keeper) =>
        Effect.gen(function* () {
          const cancelled = yield* Deferred.make<'cancel' | 'lost'>()
          keeper.watch('run-1', 7, {
            onCancelRequested: () => Effect.runSync(Deferred.succeed(cancelled, 'cancel')),
            onLost: () => Effect.runSync(Deferred.succeed(cancelled, 'lost'))
          })
          return yield* Deferred.await(cancelled)
        })
    )
    expect(outcome).toBe('cancel')
    expect(queries.polls()).toBeGreaterThan(3)
    expect(lines[0]).toMatch(/lease keeper: polling leases failed: database is locked; trying again every 5 ms/)
    expect(lines.filter((line) => line.includes('failed'))).toHaveLength(1)
    expect(lines).toContain('lease keeper: the store answers again')
  })

  it('tells a driver its lease is lost once another token holds the run', async () => {
    const queries = flakyQueries(0, { id: 'run-1', lease_owner: 'owner-2', lease_token: 8, cancel_requested_at: null })
    const outcome = await withKeeper(
      queries,
      () => {},
      (keeper) =>
        Effect.gen(function* () {
          const stopped = yield* Deferred.make<'cancel' | 'lost'>()
          keeper.watch('run-1', 7, {
            onCancelRequested: () => Effect.runSync(Deferred.succeed(stopped, 'cancel')),
            onLost: () => Effect.runSync(Deferred.succeed(stopped, 'lost'))
          })
          return yield* Deferred.await(stopped)
        })
    )
    expect(outcome).toBe('lost')
  })
})
