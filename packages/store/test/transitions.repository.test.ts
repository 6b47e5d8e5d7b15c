import { describe, expect, it } from 'vitest'
import { appendTransition, insertRun, lastTransition, listTransitions } from '@agentvisor/store'
import { DIALECTS, run, tempStore, transition } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

describe.each(DIALECTS)('transitions repository on %s', (dialect) => {
  it("returns a run's transitions in seq order whatever order they were written in", async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertRun(db, run({ id: 'other' })))
    await runCall(appendTransition(db, transition({ seq: 3, from_state: 'verifying', event: 'VERIFIED', to_state: 'finished.succeeded' })))
    await runCall(appendTransition(db, transition({ seq: 1 })))
    await runCall(appendTransition(db, transition({ seq: 2, from_state: 'acting', event: 'TOOLS_DONE', to_state: 'verifying' })))
    await runCall(appendTransition(db, transition({ run_id: 'other', seq: 1 })))

    const rows = await runCall(listTransitions(db, 'run-1'))
    expect(rows.map((row) => row.seq)).toEqual([1, 2, 3])
    expect(rows[0]).toEqual(transition({ seq: 1 }))
    expect(rows[2]).toMatchObject({ from_state: 'verifying', to_state: 'finished.succeeded' })
  })

  it('rejects a second transition with the same run and seq, keeping the first', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(appendTransition(db, transition({ seq: 1, event: 'FIRST' })))
    await expect(runCall(appendTransition(db, transition({ seq: 1, event: 'SECOND' })))).rejects.toThrow(/UNIQUE|PRIMARY KEY/i)
    expect((await runCall(listTransitions(db, 'run-1'))).map((row) => row.event)).toEqual(['FIRST'])
  })

  it('rejects a transition for a run that does not exist', async () => {
    const { db } = await tempStore(dialect)
    await expect(runCall(appendTransition(db, transition({ run_id: 'ghost' })))).rejects.toThrow(/FOREIGN KEY/i)
    expect(await runCall(listTransitions(db, 'ghost'))).toEqual([])
  })

  it('gives the highest seq as the last transition, and nothing before the first', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    expect(await runCall(lastTransition(db, 'run-1'))).toBeUndefined()
    await runCall(appendTransition(db, transition({ seq: 2, to_state: 'verifying', snapshot_json: '{"value":"verifying"}' })))
    await runCall(appendTransition(db, transition({ seq: 1 })))
    expect(await runCall(lastTransition(db, 'run-1'))).toMatchObject({ seq: 2, snapshot_json: '{"value":"verifying"}' })
  })
})
