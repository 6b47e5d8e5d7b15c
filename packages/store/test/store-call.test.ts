import { Effect, Exit } from 'effect'
import { describe, expect, it } from 'vitest'
import { fencedCall, LeaseLostError, listRuns, sqliteRunWriter, StoreError, storeCall } from '@agentvisor/store'
import { run, tempStore } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

const locked = (): Error => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })

describe('a store call', () => {
  it('fails with a StoreError naming what failed, the foreign error kept as its cause, whether it threw or rejected', async () => {
    const thrown = locked()
    const rejected = locked()
    const fromReject = await runCall(storeCall('load run run-1', () => Promise.reject(rejected))).catch((error: unknown) => error)
    const fromThrow = await runCall(
      storeCall(
        () => 'load run run-2',
        () => {
          throw thrown
        }
      )
    ).catch((error: unknown) => error)
    expect(fromReject).toBeInstanceOf(StoreError)
    expect(fromReject).toMatchObject({ message: 'store: load run run-1 failed: database is locked', cause: rejected })
    expect(fromThrow).toBeInstanceOf(StoreError)
    expect(fromThrow).toMatchObject({ message: 'store: load run run-2 failed: database is locked', cause: thrown })
  })

  it("keeps a StoreError of the store's own, and a fenced call's LeaseLostError, as they are", async () => {
    const corrupt = new StoreError({ message: 'run run-1: steps.results_json is corrupt', runId: 'run-1', column: 'steps.results_json' })
    const lost = new LeaseLostError({ runId: 'run-1' })
    expect(await runCall(storeCall('load run run-1', () => Promise.reject(corrupt))).catch((error: unknown) => error)).toBe(corrupt)
    expect(await runCall(fencedCall('commit', () => Promise.reject(lost))).catch((error: unknown) => error)).toBe(lost)
    const thrownLost = Effect.runSyncExit(
      fencedCall('commit', () => {
        throw lost
      })
    )
    expect(thrownLost).toEqual(Exit.fail(lost))
    // An unfenced call has no lease to lose: there it is the store failing like any other error.
    expect(await runCall(storeCall('load run run-1', () => Promise.reject(lost))).catch((error: unknown) => error)).toMatchObject({
      _tag: 'StoreError',
      cause: lost
    })
  })

  it('answers a synchronous answer at once: a settled Exit from now(), Effect.runSync succeeds, no promise is made', () => {
    const call = storeCall('count', () => 42)
    const now = call.now()
    expect(Exit.isExit(now)).toBe(true)
    expect(now).toEqual(Exit.succeed(42))
    expect(Effect.runSync(call)).toBe(42)
    const failing = storeCall('count', () => {
      throw locked()
    }).now()
    expect(Exit.isExit(failing) && Exit.isFailure(failing)).toBe(true)
  })

  it('waits for an answer by promise: now() hands back the Effect that waits, not an Exit', async () => {
    const now = storeCall('count', () => Promise.resolve(42)).now()
    expect(Exit.isExit(now)).toBe(false)
    expect(await Effect.runPromise(now)).toBe(42)
  })

  it('is lazy like any Effect: nothing is called until it runs, each run calls again, and a name is made only for a failure', () => {
    let calls = 0
    let named = 0
    const call = storeCall(
      () => {
        named += 1
        return 'count'
      },
      () => ++calls
    )
    expect(calls).toBe(0)
    expect(Effect.runSync(call)).toBe(1)
    expect(Effect.runSync(call)).toBe(2)
    expect(named).toBe(0)
  })

  it("answers SQLite's writes and reads through the run writer at once", async () => {
    const store = await tempStore('sqlite')
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    try {
      const created = writer.createRun(run(), { owner: 'me', expiresAt: 5000 }).now()
      expect(created).toEqual(Exit.succeed(1))
      expect(Effect.runSync(writer.loadRun('run-1'))).toMatchObject({ run: { id: 'run-1', lease_owner: 'me' }, last: undefined, steps: [] })
      // The repositories go through Kysely, which answers by promise on every dialect.
      expect((await runCall(listRuns(store.db))).map((r) => r.id)).toEqual(['run-1'])
    } finally {
      await runCall(writer.close())
    }
  })
})
