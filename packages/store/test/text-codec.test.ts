import BetterSqlite3 from 'better-sqlite3'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  completeToolEffect,
  decideApproval,
  getRun,
  insertApproval,
  insertAttempt,
  insertPolicyEvents,
  insertRun,
  insertStep,
  kyselyRunWriter,
  listApprovals,
  listAttempts,
  listPolicyEvents,
  listRuns,
  listSteps,
  listToolEffects,
  openStore,
  type RunWriter,
  setStepFeedback,
  settleAttempt,
  postgresRunWriter,
  sqliteRunWriter,
  startToolEffect,
  type Store
} from '@agentvisor/store'
import { decodeJsonText, decodeText, encodeJsonText, encodeText } from '../src/text-codec.js'
import { DIALECTS, SNAPSHOT, attempt, journalTransition, run, step, tempLocation, tempStore, type TestDialect } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

/** Text a tool or a model may produce that neither database holds as it is, or that looks like the escape. */
const NASTY = 'a\u0000b \u0010 c\u0010\uFDD0 \uFDD0\uFDD1 lone \uD800 and \uDC00, pair \uD83D\uDE00, end\u0000'
/** What the store holds for it, on every dialect. */
const STORED = 'a\u0010\uFDD0b \u0010\uFDD1 c\u0010\uFDD1\uFDD0 \uFDD0\uFDD1 lone \u0010\uFDD2\uE000 and \u0010\uFDD2\uE400, pair \uD83D\uDE00, end\u0010\uFDD0'

/** A tool result record as the driver journals it: JSON text, with the NUL escaped by JSON itself. */
const RESULT = { ok: true, output: `exit code: 0\nstdout:\n${NASTY}` }
const RESULT_JSON = JSON.stringify(RESULT)
/** The step's results, the same output among them. */
const RESULTS = [{ toolCallId: 'c1', name: 'exec', ...RESULT }]
const RESULTS_JSON = JSON.stringify(RESULTS)

describe('the text encoding', () => {
  it('escapes NUL, its own escape character and lone surrogates, and undoes exactly that', () => {
    expect(encodeText(NASTY)).toBe(STORED)
    expect(decodeText(STORED)).toBe(NASTY)
    // What neither holds nor resembles the escape is the same string, not a copy of it.
    const plain = 'plain text, “curly”, é, \uD83D\uDE00'
    expect(encodeText(plain)).toBe(plain)
    expect(decodeText(plain)).toBe(plain)
  })

  it('never changes JSON text, so JSON columns hold what JSON.stringify wrote', () => {
    const json = JSON.stringify({ text: NASTY, list: [NASTY, '\\u0010'] })
    expect(encodeText(json)).toBe(json)
    expect(decodeText(json)).toBe(json)
  })

  it('reads rows written before it as they were, raw NULs and stray escape characters included', () => {
    for (const old of ['a\u0000b', 'binary \u0010\u0001\u00ff', '\u0010', 'x\u0010\uFDD3', '\uFDD0\uFDD1\uFDD2']) expect(decodeText(old)).toBe(old)
  })

  it('encodes the strings inside JSON.stringify output as it encodes each string, and leaves escaped backslashes and keys alone', () => {
    const texts = [NASTY, STORED, '\\u0000 literal', '\\\u0000', '\\\\u0010', '\u001b[0m plain', '\uDBFF\uDFFF pair', 'x\uDFFF\uD800y', 'plain', '']
    for (const text of texts) {
      const value = { text, nested: [{ text }], json: JSON.stringify({ text }), n: 1, none: null }
      const encoded = { text: encodeText(text), nested: [{ text: encodeText(text) }], json: encodeText(JSON.stringify({ text })), n: 1, none: null }
      expect(JSON.parse(encodeJsonText(JSON.stringify(value)))).toEqual(encoded)
    }
    const plain = JSON.stringify({ a: 'no escape here', b: '\\ud800 is text' })
    expect(encodeJsonText(plain)).toBe(plain)
  })

  it('turns the JSON that SQLite writes from stored text into what JSON.stringify writes of the text', () => {
    const sqlite = new BetterSqlite3(':memory:')
    try {
      for (const text of [NASTY, '\\u0010\uFDD0 literal', '\\\u0010\uFDD0', 'plain', '\u0000']) {
        const json = sqlite.prepare("SELECT json_object('goal', ?) AS j").pluck().get(encodeText(text)) as string
        expect(decodeJsonText(json)).toBe(JSON.stringify({ goal: text }))
      }
    } finally {
      sqlite.close()
    }
  })
})

/** A fresh store and its location (a PostgreSQL URL with its password), closed when the test finishes. */
const openTemp = async (dialect: TestDialect): Promise<Store & { readonly location: string }> => {
  const location = await tempLocation(dialect, { migrated: true })
  const store = await openStore(location)
  onTestFinished(() => store.close())
  return Object.assign(store, { location })
}

/** What the store holds in one column of one row, read past the store's own reading. */
const storedValue = async (store: Store & { readonly location: string }, dialect: TestDialect, sql: string): Promise<unknown> => {
  if (dialect === 'sqlite') return store.sqlite!.prepare(sql).pluck().get()
  const client = new pg.Client({ connectionString: store.location })
  await client.connect()
  try {
    return Object.values((await client.query(sql)).rows[0] as object)[0]
  } finally {
    await client.end()
  }
}

describe.each(DIALECTS)('text with NUL bytes on %s', (dialect) => {
  it('round-trips byte for byte in every column that holds tool or model text, stored in the same form on every dialect', async () => {
    const store = await openTemp(dialect)
    const { db } = store
    await runCall(insertRun(db, run({ goal: NASTY })))
    await runCall(
      insertStep(
        db,
        step({
          prompt_summary: NASTY,
          text: NASTY,
          tool_calls_json: JSON.stringify([{ id: 'c1', name: 'exec', arguments: NASTY }]),
          results_json: RESULTS_JSON
        })
      )
    )
    expect(await runCall(setStepFeedback(db, 'run-1', 1, NASTY))).toBe(true)
    await runCall(insertAttempt(db, attempt({ partial_text: NASTY })))
    await runCall(settleAttempt(db, 'run-1', 1, 0, { outcome: 'failed', settled_at: '2026-11-29T12:00:02.000Z', error_message: NASTY, partial_text: NASTY }))
    await runCall(
      startToolEffect(db, {
        run_id: 'run-1',
        step: 1,
        position: 0,
        tool_call_id: 'c1',
        name: 'exec',
        arguments: NASTY,
        started_at: '2026-11-29T12:00:01.000Z'
      })
    )
    await runCall(completeToolEffect(db, 'run-1', 1, 0, RESULT_JSON, '2026-11-29T12:00:02.000Z'))
    await runCall(
      insertApproval(db, {
        id: 'ap-1',
        run_id: 'run-1',
        step: 1,
        tool_call_id: 'c1',
        act: 'exec',
        target: NASTY,
        payload_json: JSON.stringify({ name: 'exec', arguments: NASTY }),
        rule: 'default',
        layer: 'default',
        source: null,
        edited_payload_json: null,
        created_at: '2026-11-29T12:00:01.000Z',
        decided_at: null
      })
    )
    await runCall(
      decideApproval(db, 'ap-1', {
        status: 'approved',
        source: 'cli',
        remember: false,
        editedPayloadJson: null,
        decidedAt: '2026-11-29T12:00:02.000Z',
        resolution: 'completed',
        account: NASTY
      })
    )
    await runCall(
      insertPolicyEvents(db, [
        {
          run_id: 'run-1',
          step: 1,
          kind: 'decision',
          act: 'exec',
          target: NASTY,
          rule: 'default',
          layer: 'default',
          decision: 'approved',
          source: 'cli',
          request_id: 'ap-1',
          performed_target: NASTY,
          at: '2026-11-29T12:00:02.000Z'
        }
      ])
    )

    expect((await runCall(getRun(db, 'run-1')))!.goal).toBe(NASTY)
    expect((await runCall(listRuns(db))).map((r) => r.goal)).toEqual([NASTY])
    const [stored] = await runCall(listSteps(db, 'run-1'))
    expect(stored).toMatchObject({ prompt_summary: NASTY, text: NASTY, feedback: NASTY, results: RESULTS })
    expect(stored!.tool_calls).toEqual([{ id: 'c1', name: 'exec', arguments: NASTY }])
    expect(stored!.results![0]!.output).toBe(`exit code: 0\nstdout:\n${NASTY}`)
    expect(await runCall(listAttempts(db, 'run-1'))).toMatchObject([{ error_message: NASTY, partial_text: NASTY }])
    expect(await runCall(listToolEffects(db, 'run-1'))).toMatchObject([{ arguments: NASTY, result: RESULT }])
    expect(await runCall(listApprovals(db, 'run-1'))).toMatchObject([{ target: NASTY, account: NASTY }])
    expect(await runCall(listPolicyEvents(db, 'run-1'))).toMatchObject([{ target: NASTY, performed_target: NASTY }])

    // The form on disk is the codec's, the same on both dialects: a store copied across reads back the same.
    expect(await storedValue(store, dialect, "SELECT text FROM steps WHERE run_id = 'run-1'")).toBe(STORED)
    expect(await storedValue(store, dialect, "SELECT partial_text FROM attempts WHERE run_id = 'run-1'")).toBe(STORED)
    expect(await storedValue(store, dialect, "SELECT result_json FROM tool_effects WHERE run_id = 'run-1'")).toBe(RESULT_JSON)
  })

  it('finds a row by text that holds a NUL byte', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run({ id: 'run-\u0000-1' })))
    expect((await runCall(getRun(db, 'run-\u0000-1')))?.id).toBe('run-\u0000-1')
  })
})

/** Each writer the store has, on each dialect it runs on. */
const WRITERS: ReadonlyArray<readonly [string, TestDialect]> = [
  ...DIALECTS.map((d) => [`kysely on ${d}`, d] as const),
  ['prepared statements on sqlite', 'sqlite'],
  ['one statement a call on postgres', 'postgres']
]

const writerOf = (name: string, store: Store): RunWriter =>
  name.startsWith('prepared')
    ? sqliteRunWriter(store.db, store.sqlite!)
    : name.startsWith('one statement')
      ? postgresRunWriter(store.pool!)
      : kyselyRunWriter(store.db)

describe.each(WRITERS)('text with NUL bytes through the run writer (%s)', (name, dialect) => {
  it('commits a step, its receipt and its journal with NUL bytes, read back the same by the writer and the repositories', async () => {
    const store = await openTemp(dialect)
    const writer = writerOf(name, store)
    const token = await runCall(writer.createRun(run({ goal: NASTY }), { owner: 'me', expiresAt: 5000 }))
    await runCall(
      writer.write('run-1', token, [
        { op: 'insertAttempt', row: attempt() },
        {
          op: 'startToolEffect',
          row: { run_id: 'run-1', step: 1, position: 0, tool_call_id: 'c1', name: 'exec', arguments: NASTY, started_at: '2026-11-29T12:00:01.000Z' }
        },
        { op: 'completeToolEffect', runId: 'run-1', step: 1, position: 0, resultJson: RESULT_JSON, at: '2026-11-29T12:00:02.000Z' }
      ])
    )
    await runCall(
      writer.commit({
        runId: 'run-1',
        leaseToken: token,
        writes: [
          {
            op: 'settleAttempt',
            runId: 'run-1',
            step: 1,
            attempt: 0,
            patch: { outcome: 'failed', settled_at: '2026-11-29T12:00:02.000Z', error_message: NASTY, partial_text: NASTY }
          },
          { op: 'insertStep', row: step({ prompt_summary: NASTY, text: NASTY }) },
          { op: 'setStepResults', runId: 'run-1', step: 1, resultsJson: RESULTS_JSON },
          { op: 'setStepFeedback', runId: 'run-1', step: 1, feedback: NASTY }
        ],
        transitions: [journalTransition()],
        snapshot: SNAPSHOT,
        head: {
          status: 'running',
          state: 'acting',
          steps: 1,
          updated_at: '2026-11-29T12:00:02.000Z',
          error_json: JSON.stringify({ kind: 'internal', message: NASTY }),
          ended_at: null
        }
      })
    )

    const loaded = await runCall(writer.loadRun('run-1'))
    expect(loaded!.run.goal).toBe(NASTY)
    expect(loaded!.run.error).toEqual({ kind: 'internal', message: NASTY })
    expect(loaded!.steps).toMatchObject([{ prompt_summary: NASTY, text: NASTY, feedback: NASTY, results: RESULTS }])
    expect(await runCall(writer.toolEffects('run-1', 1))).toMatchObject([{ arguments: NASTY, result: RESULT }])
    expect(await runCall(listAttempts(store.db, 'run-1'))).toMatchObject([{ error_message: NASTY, partial_text: NASTY }])
    expect(await runCall(listSteps(store.db, 'run-1'))).toMatchObject([{ text: NASTY, feedback: NASTY }])
    expect(await storedValue(store, dialect, "SELECT feedback FROM steps WHERE run_id = 'run-1'")).toBe(STORED)
    await runCall(writer.close())
  })
})

describe('a SQLite store written before the text encoding', () => {
  it('reads back its raw NULs and stray escape characters as they were written', async () => {
    const store = await tempStore('sqlite')
    await runCall(insertRun(store.db, run()))
    // Written past the codec, as an older version wrote it.
    const old = 'out\u0000put \u0010\u0001 binary'
    store.sqlite!.prepare("INSERT INTO steps (run_id, step, provider, text, at) VALUES ('run-1', 1, 'p', ?, 'now')").run(old)
    expect((await runCall(listSteps(store.db, 'run-1')))[0]!.text).toBe(old)
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    expect((await runCall(writer.loadRun('run-1')))!.steps[0]!.text).toBe(old)
  })
})
