import { mkdirSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { CHAIN_NAMES } from '../packages/store/src/migrations/names.js'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'
import { freshDatabase } from './support/pg.js'

// Stores written by the previous release (commit 1ccb085) with its own CLI, one per dialect, and
// what that CLI showed of their runs (packages/store/test/fixtures/previous-release/, whose
// make-fixtures.mjs says how they were made): opened by this release, they walk the rest of the
// chain (docs/deploy.md, "Migrations"), read back as they were shown, and take new commits.
const FIXTURES = new URL('../packages/store/test/fixtures/previous-release/', import.meta.url)

interface Shown {
  readonly runs: ReadonlyArray<{ readonly id: string }>
  readonly traces: { readonly finished: Trace; readonly paused: Trace }
}
interface Trace {
  readonly run: { readonly id: string; readonly status: string; readonly createdAt: string }
  readonly transitions: ReadonlyArray<{ readonly seq: number; readonly from: string; readonly to: string }>
}

/** A fixture's text with the folder its runs ran in and the mock LLM's port put back: this test's folder. */
const fixture = (name: string, dir: string): string => readFileSync(new URL(name, FIXTURES), 'utf8').replaceAll('@DIR@', dir).replaceAll('@PORT@', '9')

/** The previous release's store of `dialect`, restored in a fresh folder (its runs' workspaces there too) or database. */
const restored = async (dialect: 'sqlite' | 'postgres'): Promise<{ readonly dir: string; readonly db: string; readonly shown: Shown; readonly sql: Sql }> => {
  const dir = tempDir('agentvisor-prev-')
  for (const name of ['finished', 'paused']) mkdirSync(path.join(dir, name, 'ws'), { recursive: true })
  const dump = fixture(`${dialect}-store.sql`, dir)
  const shown = JSON.parse(fixture(`${dialect}-shown.json`, dir)) as Shown
  if (dialect === 'sqlite') {
    const db = path.join(dir, 'av.db')
    const raw = new BetterSqlite3(db)
    try {
      raw.exec(dump)
    } finally {
      raw.close()
    }
    return { dir, db, shown, sql: sqliteSql(db) }
  }
  const database = await freshDatabase({ migrated: false })
  // A client of its own: the dump empties its session's search_path.
  const client = new pg.Client({ connectionString: database.url })
  await client.connect()
  try {
    await client.query(dump)
  } finally {
    await client.end()
  }
  return { dir, db: database.url, shown, sql: database.query }
}

type Sql = <R extends object = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<R[]>
const sqliteSql =
  (file: string): Sql =>
  async <R extends object>(text: string, params: unknown[] = []) => {
    const raw = new BetterSqlite3(file)
    try {
      const statement = raw.prepare(text.replace(/\$\d+/g, '?'))
      return (statement.reader ? statement.all(...params) : (statement.run(...params), [])) as R[]
    } finally {
      raw.close()
    }
  }

const show = async (db: string, runId: string): Promise<Trace> => {
  const shown = await runCli(['show', runId, '--json', '--db', db])
  expect(shown.code, shown.stderr).toBe(0)
  return lastJson<Trace>(shown)
}

describe.each(['sqlite', 'postgres'] as const)('a %s store of the previous release', (dialect) => {
  it('walks the rest of the chain, shows every run as that release showed it, and resumes its paused run to the end', async () => {
    const { dir, db, shown, sql } = await restored(dialect)
    const { finished, paused } = shown.traces
    expect(finished.run.status).toBe('succeeded')
    expect(paused.run.status).toBe('awaiting_approval')
    expect((await sql<{ name: string }>('select name from kysely_migration order by name')).map((row) => row.name)).toEqual(CHAIN_NAMES.slice(0, -1))

    // The first command opens it with this release's store: the rest of the chain is applied.
    const listed = await runCli(['runs', '--json', '--db', db])
    expect(listed.code, listed.stderr).toBe(0)
    expect(lastJson(listed)).toEqual(shown.runs)
    expect((await sql<{ name: string }>('select name from kysely_migration order by name')).map((row) => row.name)).toEqual(CHAIN_NAMES)
    expect(await show(db, finished.run.id)).toEqual(finished)
    expect(await show(db, paused.run.id)).toEqual(paused)

    // A run's timeout counts from its creation (docs/task-file.md): the paused run is made a
    // moment old, or it would have timed out by the time this test resumes it.
    await sql('update runs set created_at = $1 where id = $2', [new Date().toISOString(), paused.run.id])
    const approved = await runCli(['approve', paused.run.id, '--db', db])
    expect(approved.code, approved.stderr).toBe(0)
    const resumed = await runCli(['resume', paused.run.id, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toMatchObject({ runId: paused.run.id, status: 'succeeded', steps: 2 })
    expect(readFileSync(path.join(dir, 'paused', 'ws', 'out.txt'), 'utf8')).toBe('DONE')
    const after = await show(db, paused.run.id)
    expect(after.transitions.slice(0, paused.transitions.length)).toEqual(paused.transitions)
    expect(after.transitions.map((t) => t.seq)).toEqual(after.transitions.map((_, i) => i + 1))
    expect(after.transitions.slice(paused.transitions.length).map((t) => `${t.from}>${t.to}`)).toEqual([
      'awaitingApproval>acting',
      'acting>verifying',
      'verifying>finished.succeeded'
    ])
    expect(await show(db, finished.run.id)).toEqual(finished)

    // And a new run on the upgraded store.
    const task = writeTask(dir, {
      goal: 'a new run on an upgraded store',
      workspace: 'new-ws',
      providers: [{ name: 'script', kind: 'scripted', steps: [{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }] }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      policy: { layers: [{ name: 'team', allow: { write: ['out.txt'] } }] }
    })
    mkdirSync(path.join(dir, 'new-ws'))
    const ran = await runCli(['run', task, '--json', '--db', db])
    expect(ran.code, ran.stderr).toBe(0)
    const newRun = lastJson<{ runId: string; status: string }>(ran)
    expect(newRun.status).toBe('succeeded')
    const all = lastJson<Array<{ id: string; status: string }>>(await runCli(['runs', '--json', '--db', db]))
    expect(new Map(all.map((r) => [r.id, r.status]))).toEqual(
      new Map([
        [finished.run.id, 'succeeded'],
        [paused.run.id, 'succeeded'],
        [newRun.runId, 'succeeded']
      ])
    )
  })
})
