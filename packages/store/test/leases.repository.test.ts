import { describe, expect, it } from 'vitest'
import { acquireLease, checkFence, insertRun, isCancelRequested, LeaseLostError, releaseLease, renewLease, requestCancel } from '@agentvisor/store'
import { run, tempStore } from './support/temp-store.js'

const never = () => false

describe('run leases', () => {
  it('lets one owner hold a run; a second live owner gets the holder back', async () => {
    const { db } = await tempStore()
    await insertRun(db, run())
    expect(await acquireLease(db, { runId: 'run-1', owner: 'a', now: 1000, ttlMs: 500, isAbandoned: never })).toEqual({ token: 1 })
    expect(await acquireLease(db, { runId: 'run-1', owner: 'b', now: 1200, ttlMs: 500, isAbandoned: never })).toEqual({ holder: { owner: 'a', expiresAt: 1500 } })
    expect(await acquireLease(db, { runId: 'missing', owner: 'b', now: 1200, ttlMs: 500, isAbandoned: never })).toBeUndefined()
  })

  it('hands an expired or abandoned lease over with a new fencing token, and fences the old driver out', async () => {
    const { db } = await tempStore()
    await insertRun(db, run())
    await acquireLease(db, { runId: 'run-1', owner: 'a', now: 1000, ttlMs: 500, isAbandoned: never })
    expect(await acquireLease(db, { runId: 'run-1', owner: 'b', now: 1600, ttlMs: 500, isAbandoned: never })).toEqual({ token: 2 })
    expect(await acquireLease(db, { runId: 'run-1', owner: 'c', now: 1700, ttlMs: 500, isAbandoned: (o) => o === 'b' })).toEqual({ token: 3 })
    await expect(checkFence(db, 'run-1', 2)).rejects.toBeInstanceOf(LeaseLostError)
    expect(await renewLease(db, 'run-1', 2, 9999)).toBe(false)
    await expect(checkFence(db, 'run-1', 3)).resolves.toBeUndefined()
    expect(await renewLease(db, 'run-1', 3, 9999)).toBe(true)
  })

  it('frees the lease on release only for the current token', async () => {
    const { db } = await tempStore()
    await insertRun(db, run())
    await acquireLease(db, { runId: 'run-1', owner: 'a', now: 1000, ttlMs: 500, isAbandoned: never })
    await releaseLease(db, 'run-1', 7)
    expect(await acquireLease(db, { runId: 'run-1', owner: 'b', now: 1100, ttlMs: 500, isAbandoned: never })).toMatchObject({ holder: { owner: 'a' } })
    await releaseLease(db, 'run-1', 1)
    expect(await acquireLease(db, { runId: 'run-1', owner: 'b', now: 1100, ttlMs: 500, isAbandoned: never })).toEqual({ token: 2 })
  })

  it('records a cancel request once and reports it', async () => {
    const { db } = await tempStore()
    await insertRun(db, run())
    expect(await isCancelRequested(db, 'run-1')).toBe(false)
    expect(await requestCancel(db, 'run-1', 't')).toBe(true)
    expect(await requestCancel(db, 'run-1', 't2')).toBe(true)
    expect(await isCancelRequested(db, 'run-1')).toBe(true)
    expect(await requestCancel(db, 'nope', 't')).toBe(false)
  })
})
