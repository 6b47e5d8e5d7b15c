import { describe, expect, it } from 'vitest'
import { appendTransition, insertRun, lastTransition, listTransitions } from '@agentvisor/store'
import { DIALECTS, run, tempStore, transition } from './support/temp-store.js'

describe.each(DIALECTS)('transitions repository on %s', (dialect) => {
  it("returns a run's transitions in seq order whatever order they were written in", async () => {
    const { db } = await tempStore(dialect)
    await insertRun(db, run())
    await insertRun(db, run({ id: 'other' }))
    await appendTransition(db, transition({ seq: 3, from_state: 'verifying', event: 'VERIFIED', to_state: 'finished.succeeded' }))
    await appendTransition(db, transition({ seq: 1 }))
    await appendTransition(db, transition({ seq: 2, from_state: 'acting', event: 'TOOLS_DONE', to_state: 'verifying' }))
    await appendTransition(db, transition({ run_id: 'other', seq: 1 }))

    const rows = await listTransitions(db, 'run-1')
    expect(rows.map((row) => row.seq)).toEqual([1, 2, 3])
    expect(rows[0]).toEqual(transition({ seq: 1 }))
    expect(rows[2]).toMatchObject({ from_state: 'verifying', to_state: 'finished.succeeded' })
  })

  it('rejects a second transition with the same run and seq, keeping the first', async () => {
    const { db } = await tempStore(dialect)
    await insertRun(db, run())
    await appendTransition(db, transition({ seq: 1, event: 'FIRST' }))
    await expect(appendTransition(db, transition({ seq: 1, event: 'SECOND' }))).rejects.toThrow(/UNIQUE|PRIMARY KEY/i)
    expect((await listTransitions(db, 'run-1')).map((row) => row.event)).toEqual(['FIRST'])
  })

  it('rejects a transition for a run that does not exist', async () => {
    const { db } = await tempStore(dialect)
    await expect(appendTransition(db, transition({ run_id: 'ghost' }))).rejects.toThrow(/FOREIGN KEY/i)
    expect(await listTransitions(db, 'ghost')).toEqual([])
  })

  it('gives the highest seq as the last transition, and nothing before the first', async () => {
    const { db } = await tempStore(dialect)
    await insertRun(db, run())
    expect(await lastTransition(db, 'run-1')).toBeUndefined()
    await appendTransition(db, transition({ seq: 2, to_state: 'verifying', snapshot_json: '{"value":"verifying"}' }))
    await appendTransition(db, transition({ seq: 1 }))
    expect(await lastTransition(db, 'run-1')).toMatchObject({ seq: 2, snapshot_json: '{"value":"verifying"}' })
  })
})
