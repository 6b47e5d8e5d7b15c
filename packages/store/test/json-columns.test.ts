import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import {
  decideApproval,
  getApproval,
  getRun,
  getRunRow,
  insertApproval,
  insertRun,
  insertStep,
  kyselyRunWriter,
  listApprovals,
  listChildren,
  listRuns,
  listSteps,
  listToolEffects,
  type NewApproval,
  type RunWriter,
  setStepResults,
  sqliteRunWriter,
  startToolEffect,
  completeToolEffect,
  type Store,
  StoreError,
  updateRun
} from '@agentvisor/store'
import { CONTRACT, DIALECTS, run, step, tempStore, type TestDialect } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

const CALL = { id: 'c1', name: 'write_file', arguments: '{"path":"out.txt","content":"DONE"}' }
const RESULT = { toolCallId: 'c1', name: 'write_file', ok: true, output: 'wrote out.txt' }
const PAYLOAD = { name: 'write_file', arguments: CALL.arguments }
const EDITED = { name: 'write_file', arguments: '{"path":"out.txt","content":"DONE edited"}' }
const ERROR = { kind: 'verification', message: 'out.txt does not contain DONE' }

const approval = (): NewApproval => ({
  id: 'ap-1',
  run_id: 'run-1',
  step: 1,
  tool_call_id: 'c1',
  act: 'write',
  target: 'out.txt',
  payload_json: JSON.stringify(PAYLOAD),
  rule: 'out.txt',
  layer: 'team',
  source: null,
  edited_payload_json: null,
  created_at: '2026-11-29T12:00:01.000Z',
  decided_at: null
})

/** A run with one of every JSON column filled in, as the driver writes them. */
async function fullRun(store: Store): Promise<void> {
  const { db } = store
  await runCall(insertRun(db, run()))
  await runCall(updateRun(db, 'run-1', { status: 'failed', error_json: JSON.stringify(ERROR), updated_at: '2026-11-29T12:00:03.000Z' }))
  await runCall(insertStep(db, step({ tool_calls_json: JSON.stringify([CALL]) })))
  await runCall(setStepResults(db, 'run-1', 1, JSON.stringify([RESULT])))
  await runCall(insertApproval(db, approval()))
  await runCall(decideApproval(db, 'ap-1', { status: 'approved', source: 'cli', remember: false, editedPayloadJson: JSON.stringify(EDITED), decidedAt: 't' }))
  await runCall(
    startToolEffect(db, { run_id: 'run-1', step: 1, position: 0, tool_call_id: 'c1', name: 'write_file', arguments: EDITED.arguments, started_at: 't' })
  )
  await runCall(completeToolEffect(db, 'run-1', 1, 0, JSON.stringify({ ok: true, output: 'wrote out.txt' }), 't'))
}

/** Overwrites one stored value with a raw UPDATE, as damage or a hand edit would. */
const corrupt = (store: Store, table: string, column: string, text: string) =>
  sql`UPDATE ${sql.table(table)} SET ${sql.ref(column)} = ${text} WHERE ${sql.ref(table === 'runs' ? 'id' : 'run_id')} = 'run-1'`.execute(store.db)

/** The store's error for a corrupt column: named by run and column, the reason after them. */
const corruptError = (column: string, detail: string) => ({
  _tag: 'StoreError',
  runId: 'run-1',
  column,
  message: `run run-1 has a corrupt ${column}${detail}`
})

describe.each(DIALECTS)('JSON columns on %s (docs/durability.md, "Corrupt rows")', (dialect) => {
  it('come back from every read decoded, never as JSON text', async () => {
    const store = await tempStore(dialect)
    await fullRun(store)
    const { db } = store
    const runRow = await runCall(getRunRow(db, 'run-1'))
    expect(runRow).toMatchObject({ id: 'run-1', error: ERROR })
    expect(runRow).not.toHaveProperty('error_json')
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ error: ERROR, contract: CONTRACT })
    const [stepRow] = await runCall(listSteps(db, 'run-1'))
    expect(stepRow).toMatchObject({ tool_calls: [CALL], results: [RESULT] })
    expect(Object.keys(stepRow!).filter((key) => key.endsWith('_json'))).toEqual([])
    expect(await runCall(listApprovals(db, 'run-1'))).toEqual([expect.objectContaining({ payload: PAYLOAD, edited_payload: EDITED })])
    expect(await runCall(getApproval(db, 'ap-1'))).toMatchObject({ payload: PAYLOAD, edited_payload: EDITED })
    expect(await runCall(listToolEffects(db, 'run-1'))).toEqual([expect.objectContaining({ result: { ok: true, output: 'wrote out.txt' } })])
  })

  it.each([
    ['runs', 'error_json', '{"kind":"verification"}', 'runs.error_json', ': message: is missing'],
    ['run_contracts', 'contract_json', JSON.stringify({ ...CONTRACT, providers: [] }), 'run_contracts.contract_json', ': providers: must not be empty'],
    ['steps', 'tool_calls_json', '[{"id":"c1","name":"write_file"}]', 'steps.tool_calls_json', ' (step 1): [0].arguments: is missing'],
    ['steps', 'results_json', '{"toolCallId":"c1"}', 'steps.results_json', ' (step 1): Expected a list, got an object'],
    ['steps', 'results_json', '[{"toolCallId":"c1"', 'steps.results_json', ' (step 1): '],
    [
      'approvals',
      'payload_json',
      '{"name":"write_file","arguments":{"path":"out.txt"}}',
      'approvals.payload_json',
      ' (step 1, request ap-1): arguments: Expected string'
    ],
    ['approvals', 'edited_payload_json', '"edited"', 'approvals.edited_payload_json', ' (step 1, request ap-1): Expected an object, got a string'],
    ['tool_effects', 'result_json', '{"ok":1,"output":"x"}', 'tool_effects.result_json', ' (step 1, call 0): ok: Expected boolean, actual 1']
  ])('report a corrupt %s.%s as a StoreError naming the run and the column', async (table, column, text, named, detail) => {
    const store = await tempStore(dialect)
    await fullRun(store)
    await corrupt(store, table, column, text)
    const { db } = store
    const read = {
      runs: () => runCall(getRunRow(db, 'run-1')),
      run_contracts: () => runCall(getRun(db, 'run-1')),
      steps: () => runCall(listSteps(db, 'run-1')),
      approvals: () => runCall(listApprovals(db, 'run-1')),
      tool_effects: () => runCall(listToolEffects(db, 'run-1'))
    }[table]!
    const error = await read().then(
      () => undefined,
      (e: unknown) => e
    )
    expect(error).toBeInstanceOf(StoreError)
    expect(error).toMatchObject({ _tag: 'StoreError', runId: 'run-1', column: named })
    expect((error as StoreError).message.startsWith(`run run-1 has a corrupt ${named}${detail}`)).toBe(true)
    expect((error as StoreError).message).not.toContain('\n')
  })

  it('report a corrupt error or contract from every read of a run, while the run list reads no JSON at all', async () => {
    const store = await tempStore(dialect)
    await runCall(insertRun(store.db, run({ id: 'parent' })))
    await runCall(insertRun(store.db, run()))
    await runCall(updateRun(store.db, 'run-1', { parent_id: 'parent', updated_at: 't' }))
    await corrupt(store, 'runs', 'error_json', '{"kind":"oops","message":"m"}')
    const error = corruptError(
      'runs.error_json',
      ': kind: Expected one of auth, request, transient, ceiling, budget, stalled, verification, timeout, cancelled, internal, actual "oops"'
    )
    await expect(runCall(getRun(store.db, 'run-1'))).rejects.toMatchObject(error)
    await expect(runCall(getRunRow(store.db, 'run-1'))).rejects.toMatchObject(error)
    await expect(runCall(listChildren(store.db, 'parent'))).rejects.toMatchObject(error)
    await expect(runCall(updateRun(store.db, 'run-1', { updated_at: 'u' }))).rejects.toMatchObject(error)
    const listed = await runCall(listRuns(store.db))
    expect(listed.map((r) => r.id)).toEqual(['parent', 'run-1'])
    expect(listed.flatMap((r) => Object.keys(r)).filter((key) => key.includes('error'))).toEqual([])
  })
})

/** Each writer the store has, on each dialect it runs on. */
const WRITERS: ReadonlyArray<readonly [string, TestDialect]> = [
  ...DIALECTS.map((d) => [`kysely on ${d}`, d] as const),
  ['prepared statements on sqlite', 'sqlite']
]

const writerOf = (name: string, store: Store): RunWriter => (name.startsWith('prepared') ? sqliteRunWriter(store.db, store.sqlite!) : kyselyRunWriter(store.db))

/** A writer's read, whether it answers now (SQLite) or later: its value, or what it failed with. */
const settle = async <A>(read: () => A | Promise<A>): Promise<{ value?: A; error?: unknown }> => {
  try {
    return { value: await read() }
  } catch (error) {
    return { error }
  }
}

describe.each(WRITERS)('the run writer reads (%s)', (name, dialect) => {
  it('loads a run, its approvals and its journal decoded', async () => {
    const store = await tempStore(dialect)
    await fullRun(store)
    const writer = writerOf(name, store)
    const loaded = await runCall(writer.loadRun('run-1'))
    expect(loaded?.run).toMatchObject({ error: ERROR, contract: CONTRACT })
    expect(loaded?.steps).toMatchObject([{ tool_calls: [CALL], results: [RESULT] }])
    expect(await runCall(writer.approvals('run-1', 1))).toMatchObject([{ payload: PAYLOAD, edited_payload: EDITED }])
    expect(await runCall(writer.toolEffects('run-1', 1))).toMatchObject([{ result: { ok: true, output: 'wrote out.txt' } }])
    await runCall(writer.close())
  })

  it('fails each read of a corrupt row with the StoreError naming its run and column', async () => {
    const store = await tempStore(dialect)
    await fullRun(store)
    const writer = writerOf(name, store)
    await corrupt(store, 'run_contracts', 'contract_json', '{"goal":"g"}')
    await corrupt(store, 'approvals', 'payload_json', '[]')
    await corrupt(store, 'tool_effects', 'result_json', 'null')
    expect(await settle(() => runCall(writer.loadRun('run-1')))).toEqual({
      error: expect.objectContaining({ column: 'run_contracts.contract_json', runId: 'run-1' })
    })
    expect(await settle(() => runCall(writer.approvals('run-1', 1)))).toEqual({
      error: expect.objectContaining(corruptError('approvals.payload_json', ' (step 1, request ap-1): Expected an object, got a list'))
    })
    expect(await settle(() => runCall(writer.toolEffects('run-1', 1)))).toEqual({
      error: expect.objectContaining(corruptError('tool_effects.result_json', ' (step 1, call 0): Expected an object, got null'))
    })
    await runCall(writer.close())
  })
})
