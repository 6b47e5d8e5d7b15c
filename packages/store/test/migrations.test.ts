import { readFileSync } from 'node:fs'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { Kysely, Migrator, NO_MIGRATIONS, PostgresDialect, SqliteDialect, sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import {
  getRun,
  insertRun,
  lastTransition,
  listAttempts,
  listJournalEntries,
  listSteps,
  listTransitions,
  migrationProvider,
  migrations,
  openStore,
  postgresRunWriter
} from '@agentvisor/store'
import { postgresSchema, sqliteSchema } from './support/schema-dump.js'
import { attempt, CONTRACT, DIALECTS, SNAPSHOT, journalTransition, run, step, tempDir, tempLocation, tempStore } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

const fixture = <A>(name: string): A => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8')) as A

/** Applies the migrations up to and including `name` (not the later ones) to `db`. */
async function migrateTo(db: Kysely<any>, name: string): Promise<void> {
  const { error } = await new Migrator({ db, provider: migrationProvider }).migrateTo(name)
  if (error !== undefined) throw error
}

// The SQLite fixtures were taken from the migrations as they were before PostgreSQL support, and
// the migrations are frozen: a SQLite file migrated then and one migrated now must get the very
// same schema from them. A later migration is checked from the day it is added to the fixtures.
describe('migrations on SQLite', () => {
  it('produce the very schema they always produced', async () => {
    const frozen = fixture<{ migratedTo: string; objects: unknown[] }>('sqlite-schema.json')
    const file = path.join(tempDir(), 'agentvisor.db')
    const db = new Kysely<any>({ dialect: new SqliteDialect({ database: new BetterSqlite3(file) }) })
    try {
      await migrateTo(db, frozen.migratedTo)
    } finally {
      await db.destroy()
    }
    expect(sqliteSchema(file)).toEqual(frozen.objects)
  })

  it('issue the very statements they always issued, byte for byte', async () => {
    const frozen = fixture<Record<string, unknown[]>>('sqlite-migration-statements.json')
    const names = Object.keys(migrations).sort()
    // No frozen migration was renamed or dropped, and none slipped in before one.
    expect(names.slice(0, Object.keys(frozen).length)).toEqual(Object.keys(frozen))

    const issued: Record<string, { sql: string; parameters: readonly unknown[] }[]> = {}
    let current: { sql: string; parameters: readonly unknown[] }[] = []
    const db = new Kysely<any>({
      dialect: new SqliteDialect({ database: new BetterSqlite3(':memory:') }),
      log: (event) => void current.push({ sql: event.query.sql, parameters: event.query.parameters })
    })
    try {
      for (const name of Object.keys(frozen)) {
        current = issued[name] = []
        await migrations[name]!.up(db)
      }
    } finally {
      await db.destroy()
    }
    expect(issued).toEqual(frozen)
  })
})

describe('migrations on PostgreSQL', () => {
  /** A fresh database migrated up to `name` (not by `openStore`, which goes to the newest). */
  async function migratedTo(name: string): Promise<string> {
    const url = await tempLocation('postgres')
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url }) }) })
    try {
      await migrateTo(db, name)
    } finally {
      await db.destroy()
    }
    return url
  }

  it('produce the frozen PostgreSQL schema', async () => {
    const { migratedTo: name, ...frozen } = fixture<{ migratedTo: string }>('postgres-schema.json')
    expect(await postgresSchema(await migratedTo(name))).toEqual(frozen)
  })

  it('keep epoch milliseconds in bigint, number the audit with an identity, and compare text byte-wise', async () => {
    const url = await tempLocation('postgres')
    await (await openStore(url)).close()
    const { columns } = (await postgresSchema(url)) as { columns: Array<Record<string, string | null>> }
    const column = (table: string, name: string) => columns.find((c) => c.table_name === table && c.column_name === name)
    expect(column('runs', 'lease_expires_at')?.data_type).toBe('bigint')
    expect(column('runs', 'lease_token')?.data_type).toBe('bigint')
    expect(column('attempts', 'latency_ms')?.data_type).toBe('bigint')
    expect(column('policy_events', 'id')).toMatchObject({ data_type: 'bigint', is_identity: 'YES' })
    const text = columns.filter((c) => c.data_type === 'text')
    expect(text.length).toBeGreaterThan(50)
    expect(text.filter((c) => c.collation_name !== 'C')).toEqual([])
  })
})

describe.each(DIALECTS)('migrations on %s', (dialect) => {
  it('move existing contracts out of the runs rows when run_contracts arrives', async () => {
    const store = await tempStore(dialect, { byChain: true })
    // Migrations run with defensive mode off, as openStore runs them (2026-12-02T090000).
    store.sqlite?.unsafeMode(true)
    const db = store.db as unknown as Kysely<any>
    const migrator = new Migrator({ db, provider: migrationProvider })
    // Back to the schema before run_contracts, with a run as that version wrote it.
    expect((await migrator.migrateTo('2026-11-29T170000-durability')).error).toBeUndefined()
    await db
      .insertInto('runs')
      .values({
        id: 'old',
        status: 'running',
        goal: 'g',
        contract_json: JSON.stringify({ ...CONTRACT, goal: 'g' }),
        state: 'dispatching',
        created_at: 't',
        updated_at: 't'
      })
      .execute()

    expect((await migrator.migrateToLatest()).error).toBeUndefined()
    expect(await runCall(getRun(store.db, 'old'))).toMatchObject({ id: 'old', contract: { ...CONTRACT, goal: 'g' } })
    const { rows } = await sql<{ n: number }>`select count(*) as n from run_contracts`.execute(db)
    expect(Number(rows[0]?.n)).toBe(1)
  })

  it('turn each transition of an older store into a journal entry of its own, its snapshot in the version 1 envelope', async () => {
    const store = await tempStore(dialect, { byChain: true })
    // Migrations run with defensive mode off, as openStore runs them (2026-12-02T090000).
    store.sqlite?.unsafeMode(true)
    const db = store.db as unknown as Kysely<any>
    const migrator = new Migrator({ db, provider: migrationProvider })
    // Back to the schema before the compact journal, with a run's rows as that version wrote them.
    expect((await migrator.migrateTo('2026-11-29T210000-clustered-tables')).error).toBeUndefined()
    await runCall(insertRun(store.db, run({ id: 'old' })))
    const snapshots = ['{"status":"active","value":"acting","context":{"step":1}}', '{"status":"active","value":"verifying","context":{"step":1}}']
    await db
      .insertInto('transitions')
      .values([
        { run_id: 'old', seq: 1, from_state: 'dispatching', event: 'PROVIDER_OK', to_state: 'acting', snapshot_json: snapshots[0], at: 't1' },
        { run_id: 'old', seq: 2, from_state: 'acting', event: 'TOOLS_DONE', to_state: 'verifying', snapshot_json: snapshots[1], at: 't2' }
      ])
      .execute()

    expect((await migrator.migrateToLatest()).error).toBeUndefined()
    const entries = await runCall(listJournalEntries(store.db, 'old'))
    expect(entries.map((e) => ({ ...e, transitions_json: JSON.parse(e.transitions_json), snapshot_json: JSON.parse(e.snapshot_json) }))).toEqual([
      {
        run_id: 'old',
        seq: 1,
        first_seq: 1,
        transitions_json: [{ seq: 1, from: 'dispatching', event: { type: 'PROVIDER_OK' }, to: 'acting', at: 't1' }],
        snapshot_json: { v: 1, snapshot: JSON.parse(snapshots[0]!) }
      },
      {
        run_id: 'old',
        seq: 2,
        first_seq: 2,
        transitions_json: [{ seq: 2, from: 'acting', event: { type: 'TOOLS_DONE' }, to: 'verifying', at: 't2' }],
        snapshot_json: { v: 1, snapshot: JSON.parse(snapshots[1]!) }
      }
    ])
    // Read through the view, the transitions are the rows they were.
    expect((await runCall(listTransitions(store.db, 'old'))).map(({ snapshot_json, ...t }) => t)).toEqual([
      { run_id: 'old', seq: 1, from_state: 'dispatching', event: 'PROVIDER_OK', to_state: 'acting', at: 't1' },
      { run_id: 'old', seq: 2, from_state: 'acting', event: 'TOOLS_DONE', to_state: 'verifying', at: 't2' }
    ])
    expect(await runCall(lastTransition(store.db, 'old'))).toEqual({ seq: 2, snapshot_json: `{"v":1,"snapshot":${snapshots[1]}}` })

    // And back: one row per transition again, each with its snapshot.
    expect((await migrator.migrateTo('2026-11-29T210000-clustered-tables')).error).toBeUndefined()
    const { rows } = await sql<{ seq: number; snapshot_json: string }>`select seq, snapshot_json from transitions where run_id = 'old' order by seq`.execute(db)
    expect(rows.map((r) => [Number(r.seq), JSON.parse(r.snapshot_json)])).toEqual([
      [1, JSON.parse(snapshots[0]!)],
      [2, JSON.parse(snapshots[1]!)]
    ])
  })

  it('let a run be awaiting_input after the awaiting-input migration, and still refuse a status nobody writes', async () => {
    const store = await tempStore(dialect, { byChain: true })
    // Migrations run with defensive mode off, as openStore runs them (2026-12-02T090000).
    store.sqlite?.unsafeMode(true)
    const migrator = new Migrator({ db: store.db, provider: migrationProvider })
    expect((await migrator.migrateTo('2026-12-02T080000-run-usage')).error).toBeUndefined()
    await expect(runCall(insertRun(store.db, run({ id: 'before', status: 'awaiting_input' as never })))).rejects.toThrow(/runs_status_check|CHECK/)
    expect((await migrator.migrateToLatest()).error).toBeUndefined()
    await runCall(insertRun(store.db, run({ id: 'paused', status: 'awaiting_input' as never })))
    expect((await runCall(getRun(store.db, 'paused')))?.status).toBe('awaiting_input')
    await expect(runCall(insertRun(store.db, run({ id: 'bogus', status: 'bogus' as never })))).rejects.toThrow(/runs_status_check|CHECK/)
  })

  it('roll back to nothing and forward again', async () => {
    const store = await tempStore(dialect, { byChain: true })
    // Migrations run with defensive mode off, as openStore runs them (2026-12-02T090000).
    store.sqlite?.unsafeMode(true)
    const migrator = new Migrator({ db: store.db, provider: migrationProvider })
    expect((await migrator.migrateTo(NO_MIGRATIONS)).error).toBeUndefined()
    const left = await store.db.introspection.getTables()
    expect(left.map((table) => table.name)).toEqual([])
    expect((await migrator.migrateToLatest()).error).toBeUndefined()
    expect((await store.db.introspection.getTables()).map((table) => table.name).sort()).toContain('run_contracts')
  })
})

// docs/durability.md, "How a run is stored".
describe('the run log migration on SQLite', () => {
  it("moves an older store's receipts, steps, entries and tool effects into run_log, read under their old names as they were", async () => {
    const store = await tempStore('sqlite', { byChain: true })
    // Migrations run with defensive mode off, as openStore runs them (2026-12-02T090000).
    store.sqlite?.unsafeMode(true)
    const db = store.db as unknown as Kysely<any>
    const migrator = new Migrator({ db, provider: migrationProvider })
    expect((await migrator.migrateTo('2026-12-01T130000-postgres-run-writer')).error).toBeUndefined()
    await runCall(insertRun(store.db, run({ steps: 2 })))
    const snapshot = (completed: number | string) =>
      `{"v":1,"snapshot":{"value":"dispatching","context":{"step":3,"completedSteps":${JSON.stringify(completed)}}}}`
    const receipt = (fields: object) => ({
      ...attempt(),
      outcome: 'ok',
      error_kind: null,
      http_status: null,
      error_message: null,
      latency_ms: 5,
      ttft_ms: null,
      tokens_in: 3,
      tokens_out: 4,
      partial_text: null,
      settled_at: 't1',
      ...fields
    })
    const rows = {
      attempts: [
        receipt({ step: 1 }),
        receipt({ step: 2, attempt: 1, outcome: 'failed', settled_at: 't2', error_kind: 'transient', http_status: 503, error_message: 'busy' }),
        receipt({ step: 2, attempt: 2, reason: 'retry', settled_at: 't3', partial_text: 'pa' }),
        receipt({ step: 3, outcome: 'pending', settled_at: null, latency_ms: null, tokens_in: null, tokens_out: null })
      ],
      steps: [
        {
          run_id: 'run-1',
          step: 1,
          provider: 'primary',
          prompt_summary: 'p',
          text: 'x',
          tool_calls_json: '[]',
          results_json: null,
          feedback: 'f',
          tokens_in: 1,
          tokens_out: 2,
          at: 't1'
        },
        {
          run_id: 'run-1',
          step: 2,
          provider: 'primary',
          prompt_summary: '',
          text: '',
          tool_calls_json: '[{}]',
          results_json: '[]',
          feedback: null,
          tokens_in: 0,
          tokens_out: 0,
          at: 't3'
        }
      ],
      journal_entries: [
        { run_id: 'run-1', seq: 1, first_seq: 1, transitions_json: '[]', snapshot_json: snapshot(0) },
        { run_id: 'run-1', seq: 3, first_seq: 2, transitions_json: '[]', snapshot_json: snapshot(1) },
        // Neither JSON nor a number of steps: it stays after the entry before it.
        { run_id: 'run-1', seq: 4, first_seq: 4, transitions_json: '[]', snapshot_json: 'not json' },
        { run_id: 'run-1', seq: 6, first_seq: 5, transitions_json: '[]', snapshot_json: snapshot(2) }
      ],
      tool_effects: [
        {
          run_id: 'run-1',
          step: 2,
          position: 0,
          tool_call_id: 'c1',
          name: 'write_file',
          arguments: '{}',
          status: 'completed',
          result_json: '{}',
          started_at: 't',
          completed_at: 'u'
        }
      ]
    }
    for (const [table, values] of Object.entries(rows)) await db.insertInto(table).values(values).execute()
    const expectRows = async () => {
      for (const [table, values] of Object.entries(rows)) {
        const key = table === 'journal_entries' ? 'seq' : table === 'attempts' ? 'attempt' : 'step'
        expect(
          await db
            .selectFrom(table)
            .selectAll()
            .orderBy('step' in values[0]! ? 'step' : key)
            .orderBy(key)
            .execute(),
          table
        ).toEqual(values)
      }
    }

    expect((await migrator.migrateToLatest()).error).toBeUndefined()
    await expectRows()
    // Each entry at its run's completed steps + 1, never before an earlier one.
    expect(store.sqlite!.prepare("SELECT n, step FROM run_log WHERE kind = 'j' ORDER BY step, n").raw().all()).toEqual([
      [1, 1],
      [3, 2],
      [4, 2],
      [6, 3]
    ])
    expect(await runCall(listJournalEntries(store.db, 'run-1'))).toHaveLength(4)

    // And back: the four tables again, with the same rows.
    expect((await migrator.migrateTo('2026-12-01T130000-postgres-run-writer')).error).toBeUndefined()
    await expectRows()
    const kinds = store
      .sqlite!.prepare("SELECT name, type FROM sqlite_master WHERE name IN ('attempts', 'steps', 'journal_entries', 'tool_effects', 'run_log')")
      .raw()
      .all()
    expect(new Map(kinds as Array<[string, string]>)).toEqual(
      new Map([
        ['attempts', 'table'],
        ['steps', 'table'],
        ['journal_entries', 'table'],
        ['tool_effects', 'table']
      ])
    )
    expect((await sql<{ n: number }>`select count(*) as n from transitions`.execute(db)).rows).toEqual([{ n: 0 }])
  })
})

// docs/durability.md, "How a run is stored": on PostgreSQL a step's commit passes its writes as
// columns, and the status, reason and outcome rules are domains (2026-12-01T170000).
describe('the step-commit migration on PostgreSQL', () => {
  it("keeps an older store's rows as they were, finds its pending receipts, enforces its rules and commits on from them", async () => {
    const store = await tempStore('postgres', { byChain: true })
    const db = store.db as unknown as Kysely<any>
    const pool = store.pool!
    const migrator = new Migrator({ db, provider: migrationProvider })
    expect((await migrator.migrateTo('2026-12-01T160000-run-log')).error).toBeUndefined()
    const writer = postgresRunWriter(pool)
    const token = await runCall(writer.createRun(run(), { owner: 'me', expiresAt: 5000 }))
    await runCall(writer.write('run-1', token, [{ op: 'insertAttempt', row: attempt() }]))
    // Step 1 as the writer before this migration committed it: agentvisor_commit of 2026-12-01T150000.
    await pool.query('SELECT agentvisor_commit($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12, $13)', [
      'run-1',
      token,
      null,
      'dispatching',
      1,
      't1',
      null,
      null,
      JSON.stringify([
        { op: 'settleAttempt', runId: 'run-1', step: 1, attempt: 0, patch: { outcome: 'ok', settled_at: 't1', latency_ms: 4, tokens_in: 3, tokens_out: 2 } },
        { op: 'insertStep', row: step({ text: 'hi', results_json: '[]' }) },
        { op: 'insertAttempt', row: attempt({ step: 2, started_at: 't1' }) }
      ]),
      2,
      1,
      JSON.stringify([journalTransition({ seq: 1 }), journalTransition({ seq: 2, from: 'acting', to: 'dispatching' })]),
      SNAPSHOT
    ])
    const rows = async () => ({
      run: await runCall(getRun(store.db, 'run-1')),
      attempts: await runCall(listAttempts(store.db, 'run-1')),
      steps: await runCall(listSteps(store.db, 'run-1')),
      transitions: await runCall(listTransitions(store.db, 'run-1'))
    })
    const before = await rows()
    expect(before.attempts.map((a) => [a.step, a.outcome])).toEqual([
      [1, 'ok'],
      [2, 'pending']
    ])

    expect((await migrator.migrateToLatest()).error).toBeUndefined()
    expect(await rows()).toEqual(before)
    // What resume reads, and the pending receipt of step 2 found without the index that went.
    const loaded = await runCall(writer.loadRun('run-1'))
    expect({ seq: loaded?.last?.seq, steps: loaded?.steps.map((s) => s.text), status: loaded?.run.status }).toEqual({
      seq: 2,
      steps: ['hi'],
      status: 'running'
    })
    expect(await runCall(writer.attemptRecorded('run-1', 2, 0))).toBe(true)
    // The receipts' table (`attempt_rows` since 2026-12-02T200000) has its key and no other index.
    const indexes = await pool.query<{ indexname: string }>(
      "select indexname from pg_indexes where tablename in ('attempts', 'attempt_rows') order by indexname"
    )
    expect(indexes.rows.map((r) => r.indexname)).toEqual(['attempts_pk'])

    // Step 2 committed by this version's writer, from the receipt the older one wrote.
    await runCall(
      writer.commit({
        runId: 'run-1',
        leaseToken: token,
        writes: [
          {
            op: 'settleAttempt',
            runId: 'run-1',
            step: 2,
            attempt: 0,
            patch: { outcome: 'failed', settled_at: 't2', error_kind: 'transient', http_status: 503, error_message: 'busy', partial_text: 'pa' }
          },
          { op: 'insertAttempt', row: attempt({ step: 2, attempt: 1, reason: 'retry', started_at: 't2' }) }
        ],
        transitions: [journalTransition({ seq: 3, from: 'dispatching', to: 'dispatching' })],
        snapshot: SNAPSHOT,
        head: { state: 'dispatching', steps: 1, updated_at: 't2', error_json: null, ended_at: null }
      })
    )
    expect(
      (await runCall(listAttempts(store.db, 'run-1'))).map((a) => [a.step, a.attempt, a.reason, a.outcome, a.http_status, a.error_message, a.partial_text])
    ).toEqual([
      [1, 0, 'initial', 'ok', null, null, null],
      [2, 0, 'initial', 'failed', 503, 'busy', 'pa'],
      [2, 1, 'retry', 'pending', null, null, null]
    ])
    expect(await runCall(writer.settlePending('run-1', token, 'unknown', 't3'))).toBe(1)

    // The rules hold as they did, each failure naming its constraint.
    const refused = (statement: string) =>
      pool.query(statement).then(
        () => 'written',
        (error: { code?: string; message: string }) => `${error.code} ${/constraint "(\w+)"/.exec(error.message)?.[1]}`
      )
    expect(await refused("update runs set status = 'paused'")).toBe('23514 runs_status_check')
    expect(await refused("update attempts set outcome = 'lost'")).toBe('23514 attempts_outcome_check')
    expect(await refused("insert into attempts (run_id, step, attempt, provider, reason, started_at) values ('run-1', 9, 0, 'p', 'again', 't')")).toBe(
      '23514 attempts_reason_check'
    )
    const types = await pool.query<{ table_name: string; column_name: string; data_type: string; collation_name: string }>(
      "select table_name, column_name, data_type, collation_name from information_schema.columns where (table_name, column_name) in (('runs', 'status'), ('attempts', 'reason'), ('attempts', 'outcome')) order by 1, 2"
    )
    expect(types.rows.map((c) => `${c.table_name}.${c.column_name} ${c.data_type} ${c.collation_name}`)).toEqual([
      'attempts.outcome text C',
      'attempts.reason text C',
      'runs.status text C'
    ])

    // And back: the table CHECKs and the index again, the rows as they were.
    const after = await rows()
    expect((await migrator.migrateTo('2026-12-01T160000-run-log')).error).toBeUndefined()
    expect(await rows()).toEqual(after)
    expect(await refused("update attempts set outcome = 'lost'")).toBe('23514 attempts_outcome_check')
    const checks = await pool.query<{ conname: string }>(
      "select conname from pg_constraint where contype = 'c' and conrelid in ('runs'::regclass, 'attempts'::regclass) order by conname"
    )
    expect(checks.rows.map((r) => r.conname)).toEqual(['attempts_outcome_check', 'attempts_reason_check', 'runs_status_check'])
    expect((await pool.query("select 1 from pg_indexes where indexname = 'attempts_pending_idx'")).rowCount).toBe(1)
  })
})
