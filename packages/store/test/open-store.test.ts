import { existsSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { getRun, insertRun, openStore, StoreError } from '@agentvisor/store'
import { BASELINE_NAMES, newStoreNames } from '../src/migrations/names.js'
import { openAtOnce } from './support/open-at-once.js'
import { rejectionOf } from './support/rejection-of.js'
import { run, tempDir } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

// What a query reads by name: on SQLite the per-step four are views of `run_log` (docs/durability.md, "How a run is stored").
const TABLES = ['approvals', 'attempts', 'policy_events', 'remembered_rules', 'run_contracts', 'runs', 'steps', 'tool_effects', 'journal_entries']
/** The first migration a new store runs: its dialect's baseline (docs/deploy.md, "Migrations"). */
const INITIAL = BASELINE_NAMES.sqlite[0]
/** Every migration a new store runs, in the order they run. */
const ALL = newStoreNames('sqlite')

/** Reads a file's schema with a connection of its own, so nothing goes through the store. */
function inspect(file: string): { tables: string[]; migrations: string[]; journalMode: unknown } {
  const raw = new BetterSqlite3(file, { readonly: true })
  try {
    const tables = raw
      .prepare("select name from sqlite_master where type in ('table', 'view') and name not like 'sqlite_%' order by name")
      .pluck()
      .all() as string[]
    const applied = tables.includes('kysely_migration') ? (raw.prepare('select name from kysely_migration order by name').pluck().all() as string[]) : []
    return { tables, migrations: applied, journalMode: raw.pragma('journal_mode', { simple: true }) }
  } finally {
    raw.close()
  }
}

describe('openStore on SQLite', () => {
  it('creates every table and records the migration on first open', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    const store = await openStore(file)
    await store.close()
    const schema = inspect(file)
    expect(schema.tables).toEqual(expect.arrayContaining(TABLES))
    expect(schema.migrations).toEqual(ALL)
  })

  it('says it is SQLite and hands out the raw connection for the hot path', async () => {
    const store = await openStore(path.join(tempDir(), 'agentvisor.db'))
    try {
      expect(store.dialect).toBe('sqlite')
      expect(store.sqlite?.prepare('select count(*) as n from runs').get()).toEqual({ n: 0 })
    } finally {
      await store.close()
    }
  })

  it('opens an up-to-date file with one read while another process holds the write lock', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    await (await openStore(file)).close()
    // The full migration would BEGIN IMMEDIATE and, after the 5 s busy timeout, fail.
    const other = new BetterSqlite3(file)
    other.exec('begin immediate')
    try {
      const started = Date.now()
      const store = await openStore(file)
      await store.close()
      expect(Date.now() - started).toBeLessThan(1000)
    } finally {
      other.exec('rollback')
      other.close()
    }
  })

  it('creates the missing parent folders of the database file', async () => {
    const file = path.join(tempDir(), 'nested', 'deeper', 'agentvisor.db')
    const store = await openStore(file)
    await store.close()
    expect(existsSync(file)).toBe(true)
    expect(store.file).toBe(file)
  })

  it('keeps the data and applies no migration twice when a file is reopened', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    const first = await openStore(file)
    await runCall(insertRun(first.db, run()))
    await first.close()

    const second = await openStore(file)
    try {
      expect(await runCall(getRun(second.db, 'run-1'))).toMatchObject({ id: 'run-1', status: 'running', steps: 0 })
    } finally {
      await second.close()
    }
    expect(inspect(file).migrations).toEqual(ALL)
  })

  it('puts a file database in WAL mode with NORMAL sync, foreign keys and a 5 s busy timeout', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    const store = await openStore(file)
    try {
      const pragma = async (name: string): Promise<unknown> => {
        const { rows } = await sql<Record<string, unknown>>`${sql.raw(`pragma ${name}`)}`.execute(store.db)
        return Object.values(rows[0] ?? {})[0]
      }
      expect(await pragma('journal_mode')).toBe('wal')
      expect(await pragma('synchronous')).toBe(1) // NORMAL
      expect(await pragma('foreign_keys')).toBe(1)
      expect(await pragma('busy_timeout')).toBe(5000)
    } finally {
      await store.close()
    }
    // WAL is a property of the file: a fresh connection sees it too.
    expect(inspect(file).journalMode).toBe('wal')
  })

  it('works in memory, with no file or folder created', async () => {
    const store = await openStore(':memory:')
    try {
      await runCall(insertRun(store.db, run()))
      expect(await runCall(getRun(store.db, 'run-1'))).toMatchObject({ id: 'run-1' })
      expect(store.file).toBe(':memory:')
      expect(existsSync(':memory:')).toBe(false)
    } finally {
      await store.close()
    }
  })

  it('can be closed more than once', async () => {
    const store = await openStore(path.join(tempDir(), 'agentvisor.db'))
    await store.close()
    await expect(store.close()).resolves.toBeUndefined()
  })

  it('rejects a file that is not a SQLite database with a StoreError naming the file', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    writeFileSync(file, 'this is not a database, just text long enough to fill a header page.'.repeat(20))
    const error = await rejectionOf(openStore(file))
    expect(error).toBeInstanceOf(StoreError)
    expect((error as StoreError)._tag).toBe('StoreError')
    expect((error as StoreError).message).toContain(file)
    expect((error as StoreError).cause).toBeInstanceOf(Error)
  })

  it('names the failing migration and leaves the schema as it was when a migration fails', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    const raw = new BetterSqlite3(file)
    raw.exec('create table runs (legacy text)')
    raw.close()

    const error = await rejectionOf(openStore(file))
    expect(error).toBeInstanceOf(StoreError)
    expect((error as StoreError).message).toContain(`Migration ${INITIAL} failed`)
    expect((error as StoreError).message).toContain(file)
    // All or nothing: not even Kysely's bookkeeping tables survive the failed attempt.
    expect(inspect(file).tables).toEqual(['runs'])
  })

  it('refuses a database that a newer version migrated past what this version knows', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    await (await openStore(file)).close()
    const raw = new BetterSqlite3(file)
    raw.prepare('insert into kysely_migration (name, timestamp) values (?, ?)').run('2099-01-01T000000-future', '2099-01-01T00:00:00.000Z')
    raw.close()

    const error = await rejectionOf(openStore(file))
    expect(error).toBeInstanceOf(StoreError)
    expect((error as StoreError).message).toContain(file)
    expect((error as StoreError).message).toContain('2099-01-01T000000-future')
  })

  it('migrates a fresh file once when one process opens it several times at once', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    const stores = await Promise.all([openStore(file), openStore(file), openStore(file)])
    await Promise.all(stores.map((store) => store.close()))
    expect(inspect(file).migrations).toEqual(ALL)
  })

  it('migrates a fresh file once when several processes open it at the same moment', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    await openAtOnce(file)

    expect(inspect(file).migrations).toEqual(ALL)
    expect(inspect(file).tables).toEqual(expect.arrayContaining(TABLES))
  })
})
