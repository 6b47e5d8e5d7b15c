import BetterSqlite3 from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { appendTransition, getRun, insertRun, insertStep, listSteps, listTransitions, updateRun } from '@agentvisor/store'
import { DIALECTS, run, step, tempStore, transition } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

describe.each(DIALECTS)('transactions on %s', (dialect) => {
  it('leave no rows behind when they throw', async () => {
    const { db } = await tempStore(dialect)
    const failure = new Error('crash between writes')
    await expect(
      db.transaction().execute(async (trx) => {
        await runCall(insertRun(trx, run()))
        await runCall(appendTransition(trx, transition()))
        await runCall(insertStep(trx, step()))
        throw failure
      })
    ).rejects.toBe(failure)
    expect(await runCall(getRun(db, 'run-1'))).toBeUndefined()
    expect(await runCall(listTransitions(db, 'run-1'))).toEqual([])
    expect(await runCall(listSteps(db, 'run-1'))).toEqual([])
  })

  it('commit a transition together with the run update it belongs to', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await db.transaction().execute(async (trx) => {
      await runCall(appendTransition(trx, transition({ seq: 1, to_state: 'acting' })))
      await runCall(updateRun(trx, 'run-1', { state: 'acting', updated_at: '2026-11-29T12:00:01.000Z' }))
    })
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ state: 'acting', updated_at: '2026-11-29T12:00:01.000Z' })
    expect(await runCall(listTransitions(db, 'run-1'))).toHaveLength(1)
  })
})

// SQLite only: PostgreSQL has row locks instead of one database write lock. Its counterpart, a
// fenced write holding the run's row until it commits, is in leases.repository.test.ts.
describe('transactions on sqlite', () => {
  it('hold the write lock from their first statement, so another process waits instead of failing mid-way', async () => {
    const store = await tempStore('sqlite')
    await runCall(insertRun(store.db, run()))
    const other = new BetterSqlite3(store.file, { timeout: 0 })
    try {
      await store.db.transaction().execute(async (trx) => {
        // Only a read so far: a plain BEGIN would not hold the write lock yet.
        await runCall(getRun(trx, 'run-1'))
        expect(() => other.exec('begin immediate')).toThrow(/locked|busy/i)
      })
      // Released on commit.
      other.exec('begin immediate')
      other.exec('rollback')
    } finally {
      other.close()
    }
  })
})
