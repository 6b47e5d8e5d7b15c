import { describe, expect, it } from 'vitest'
import { completeToolEffect, insertRun, listToolEffects, startToolEffect } from '@agentvisor/store'
import { DIALECTS, run, tempStore } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

const call = (position: number, overrides: Partial<Parameters<typeof startToolEffect>[1]> = {}) => ({
  run_id: 'run-1',
  step: 1,
  position,
  tool_call_id: `call_${position}`,
  name: 'exec',
  arguments: `{"command":"echo ${position}"}`,
  started_at: '2026-11-29T12:00:01.000Z',
  ...overrides
})

describe.each(DIALECTS)('tool effects journal on %s', (dialect) => {
  it('journals a call as started, then completed with its result', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(startToolEffect(db, call(0)))
    expect(await runCall(listToolEffects(db, 'run-1', 1))).toEqual([{ ...call(0), status: 'started', result: null, completed_at: null }])
    expect(await runCall(completeToolEffect(db, 'run-1', 1, 0, '{"ok":true,"output":"0"}', '2026-11-29T12:00:02.000Z'))).toBe(true)
    // The result comes back decoded (docs/durability.md, "Corrupt rows"); the arguments stay the model's text.
    expect(await runCall(listToolEffects(db, 'run-1', 1))).toEqual([
      { ...call(0), status: 'completed', result: { ok: true, output: '0' }, completed_at: '2026-11-29T12:00:02.000Z' }
    ])
    expect(await runCall(completeToolEffect(db, 'run-1', 1, 9, '{}', 't'))).toBe(false)
  })

  it('keeps one row when a call is started again, clearing its old result', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(startToolEffect(db, call(0)))
    await runCall(completeToolEffect(db, 'run-1', 1, 0, '{"ok":false,"output":"no"}', 't'))
    await runCall(startToolEffect(db, call(0, { arguments: '{"command":"echo again"}', started_at: '2026-11-29T12:00:03.000Z' })))
    expect(await runCall(listToolEffects(db, 'run-1'))).toEqual([
      { ...call(0), arguments: '{"command":"echo again"}', started_at: '2026-11-29T12:00:03.000Z', status: 'started', result: null, completed_at: null }
    ])
  })

  it("lists a run's journal by step, then position, optionally for one step", async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(startToolEffect(db, call(1, { step: 2 })))
    await runCall(startToolEffect(db, call(1)))
    await runCall(startToolEffect(db, call(0, { step: 2 })))
    await runCall(startToolEffect(db, call(0)))
    expect((await runCall(listToolEffects(db, 'run-1'))).map((row) => [row.step, row.position])).toEqual([
      [1, 0],
      [1, 1],
      [2, 0],
      [2, 1]
    ])
    expect((await runCall(listToolEffects(db, 'run-1', 2))).map((row) => row.position)).toEqual([0, 1])
  })
})
