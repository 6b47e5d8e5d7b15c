import { describe, expect, it, onTestFinished } from 'vitest'
import {
  appendTransition,
  getRun,
  insertAttempt,
  insertRun,
  insertRunOnce,
  openStore,
  RunCreation,
  insertStep,
  listAttempts,
  listChildren,
  listRuns,
  listSteps,
  listTransitions,
  RunStatus,
  toRunRecord,
  updateRun,
  type RunStatus as RunStatusType
} from '@agentvisor/store'
import { attempt, CONTRACT, DIALECTS, run, SNAPSHOT, step, tempLocation, tempStore } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

/** A run nobody drives and nobody asked to cancel. */
const NO_LEASE = {
  lease_owner: null,
  lease_expires_at: null,
  lease_token: 0,
  cancel_requested_at: null,
  root_id: null,
  usage_json: null,
  forked_from_run: null,
  forked_from_seq: null
}

describe.each(DIALECTS)('runs repository on %s', (dialect) => {
  it('round-trips a run row, with steps defaulting to 0 and nullable columns to null', async () => {
    const { db } = await tempStore(dialect)
    const { contract_json, ...row } = run()
    await runCall(insertRun(db, run()))
    // The JSON columns come back decoded, never as text (docs/durability.md, "Corrupt rows").
    expect(await runCall(getRun(db, 'run-1'))).toEqual({ ...row, ...NO_LEASE, steps: 0, error: null, ended_at: null, contract: CONTRACT })
    expect(await runCall(getRun(db, 'missing'))).toBeUndefined()
  })

  it('rejects a second run with the same id', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await expect(runCall(insertRun(db, run({ goal: 'other' })))).rejects.toThrow(/UNIQUE|PRIMARY KEY/i)
  })

  it('creates a run once when the same run is inserted many times at once, and tells another run under its id apart', async () => {
    const location = await tempLocation(dialect, { migrated: true })
    const first = await openStore(location)
    // PostgreSQL: two pools, so the inserts race in the server. SQLite: one connection (a second
    // one in this process would wait on the first's lock with the event loop blocked); processes
    // racing on one file are test/nats-submit.test.ts's workers.
    const second = dialect === 'postgres' ? await openStore(location) : first
    onTestFinished(async () => {
      if (second !== first) await second.close()
      await first.close()
    })
    const submitted = run({ id: 'submitted' })
    const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) => runCall(insertRunOnce(i % 2 === 0 ? first.db : second.db, submitted))))
    expect(outcomes.filter((outcome) => outcome === RunCreation.created)).toHaveLength(1)
    expect(outcomes.filter((outcome) => outcome === RunCreation.exists)).toHaveLength(11)
    expect((await runCall(listRuns(first.db))).map((r) => r.id)).toEqual(['submitted'])

    // The same contract with its keys in another order is the same run.
    const reordered = Object.fromEntries(Object.entries(CONTRACT).reverse())
    expect(await runCall(insertRunOnce(second.db, { ...submitted, contract_json: JSON.stringify(reordered) }))).toBe(RunCreation.exists)
    // Another contract, or another parent, under the id is another run: nothing is written.
    expect(await runCall(insertRunOnce(first.db, { ...submitted, contract_json: JSON.stringify({ ...CONTRACT, goal: 'Something else' }) }))).toBe(
      RunCreation.differs
    )
    await runCall(insertRun(first.db, run({ id: 'parent' })))
    expect(await runCall(insertRunOnce(second.db, { ...submitted, parent_id: 'parent' }))).toBe(RunCreation.differs)
    expect(await runCall(getRun(first.db, 'submitted'))).toMatchObject({ parent_id: null, contract: CONTRACT })
    expect((await runCall(listRuns(first.db))).map((r) => r.id).sort()).toEqual(['parent', 'submitted'])
  })

  it('rejects a status outside the public set', async () => {
    const { db } = await tempStore(dialect)
    await expect(runCall(insertRun(db, run({ status: 'done' as RunStatusType })))).rejects.toThrow(/CHECK constraint/i)
  })

  it('lists runs oldest first, ties broken by id, and filters by status', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run({ id: 'c', status: RunStatus.failed, created_at: '2026-11-29T12:00:02.000Z' })))
    await runCall(insertRun(db, run({ id: 'b', status: RunStatus.running, created_at: '2026-11-29T12:00:01.000Z' })))
    await runCall(insertRun(db, run({ id: 'a', status: RunStatus.running, created_at: '2026-11-29T12:00:01.000Z' })))
    await runCall(insertRun(db, run({ id: 'd', status: RunStatus.succeeded, created_at: '2026-11-29T12:00:00.000Z' })))

    expect((await runCall(listRuns(db))).map((r) => r.id)).toEqual(['d', 'a', 'b', 'c'])
    expect((await runCall(listRuns(db, { status: RunStatus.running }))).map((r) => r.id)).toEqual(['a', 'b'])
    expect((await runCall(listRuns(db, { status: RunStatus.awaitingApproval }))).map((r) => r.id)).toEqual([])
    expect((await runCall(listRuns(db, { limit: 2 }))).map((r) => r.id)).toEqual(['d', 'a'])
  })

  it('orders ids byte-wise, as SQLite does, whatever the database locale says', async () => {
    const { db } = await tempStore(dialect)
    // A locale-aware collation (the test PostgreSQL's is ICU en-US) would give a-1 A-1 a1 _x b B.
    for (const id of ['b', 'B', '_x', 'a-1', 'A-1', 'a1']) await runCall(insertRun(db, run({ id })))
    expect((await runCall(listRuns(db))).map((r) => r.id)).toEqual(['A-1', 'B', '_x', 'a-1', 'a1', 'b'])
  })

  it('lists the direct children of a run and no one else', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run({ id: 'parent' })))
    await runCall(insertRun(db, run({ id: 'child-2', parent_id: 'parent', created_at: '2026-11-29T12:00:02.000Z' })))
    await runCall(insertRun(db, run({ id: 'child-1', parent_id: 'parent', created_at: '2026-11-29T12:00:01.000Z' })))
    await runCall(insertRun(db, run({ id: 'grandchild', parent_id: 'child-1' })))

    expect((await runCall(listChildren(db, 'parent'))).map((r) => r.id)).toEqual(['child-1', 'child-2'])
    expect((await runCall(listRuns(db, { parentId: 'child-1' }))).map((r) => r.id)).toEqual(['grandchild'])
    expect(await runCall(listChildren(db, 'grandchild'))).toEqual([])
  })

  it("deletes a run's steps, receipts and journal with it, and no other run's", async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertRun(db, run({ id: 'run-2' })))
    for (const id of ['run-1', 'run-2']) {
      await runCall(insertAttempt(db, attempt({ run_id: id })))
      await runCall(insertStep(db, step({ run_id: id })))
      await runCall(
        appendTransition(db, { run_id: id, seq: 1, from_state: 'dispatching', event: 'PROVIDER_OK', to_state: 'acting', snapshot_json: SNAPSHOT, at: 't' })
      )
    }
    await db.deleteFrom('runs').where('id', '=', 'run-1').execute()
    for (const id of ['run-1', 'run-2']) {
      const left = id === 'run-1' ? 0 : 1
      expect(await runCall(listAttempts(db, id))).toHaveLength(left)
      expect(await runCall(listSteps(db, id))).toHaveLength(left)
      expect(await runCall(listTransitions(db, id))).toHaveLength(left)
    }
  })

  it('rejects a child whose parent run does not exist', async () => {
    const { db } = await tempStore(dialect)
    await expect(runCall(insertRun(db, run({ id: 'orphan', parent_id: 'nobody' })))).rejects.toThrow(/FOREIGN KEY/i)
    expect(await runCall(getRun(db, 'orphan'))).toBeUndefined()
  })

  it('updates only the patched columns and returns the new row', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    const updated = await runCall(
      updateRun(db, 'run-1', {
        status: RunStatus.succeeded,
        state: 'finished.succeeded',
        steps: 3,
        updated_at: '2026-11-29T12:05:00.000Z',
        ended_at: '2026-11-29T12:05:00.000Z'
      })
    )
    const { contract_json, ...columns } = run()
    const row = {
      ...columns,
      ...NO_LEASE,
      status: 'succeeded',
      state: 'finished.succeeded',
      steps: 3,
      error: null,
      updated_at: '2026-11-29T12:05:00.000Z',
      ended_at: '2026-11-29T12:05:00.000Z'
    }
    // The contract lives in its own table: the hot row never carries it.
    expect(updated).toEqual(row)
    expect(await runCall(getRun(db, 'run-1'))).toEqual({ ...row, contract: CONTRACT })
  })

  it('returns undefined when updating a run that does not exist', async () => {
    const { db } = await tempStore(dialect)
    expect(await runCall(updateRun(db, 'missing', { status: RunStatus.failed, updated_at: '2026-11-29T12:05:00.000Z' }))).toBeUndefined()
    expect(await runCall(listRuns(db))).toEqual([])
  })

  it('maps a row to the runs --json shape, with exactly the documented keys', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run({ id: 'parent' })))
    await runCall(insertRun(db, run({ id: 'child', parent_id: 'parent', status: RunStatus.stepCap })))
    const child = await runCall(getRun(db, 'child'))
    if (child === undefined) throw new Error('child not stored')

    const record = toRunRecord(child)
    expect(record).toEqual({
      id: 'child',
      status: 'step_cap',
      goal: 'Write DONE into out.txt',
      parentId: 'parent',
      createdAt: '2026-11-29T12:00:00.000Z',
      updatedAt: '2026-11-29T12:00:00.000Z'
    })
    expect(Object.keys(record)).toEqual(['id', 'status', 'goal', 'parentId', 'createdAt', 'updatedAt'])
    const parent = await runCall(getRun(db, 'parent'))
    expect(parent && toRunRecord(parent).parentId).toBeNull()
  })
})
