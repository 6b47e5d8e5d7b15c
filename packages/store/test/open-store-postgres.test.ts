import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { getRun, insertRun, openStore, StoreError } from '@agentvisor/store'
import { BASELINE_NAMES, newStoreNames } from '../src/migrations/names.js'
import { openAtOnce } from './support/open-at-once.js'
import { rejectionOf } from './support/rejection-of.js'
import { databaseUrl, run, tempLocation } from './support/temp-store.js'
import { freePort } from '../../../test/support/free-port.js'
import { runCall } from '../../../test/support/run-call.js'

const TABLES = [
  'approvals',
  'attempts',
  'policy_events',
  'remembered_rules',
  'run_contracts',
  'runs',
  'steps',
  'tool_effects',
  'journal_entries',
  'transitions'
]
/** The first migration a new store runs: its dialect's baseline (docs/deploy.md, "Migrations"). */
const INITIAL = BASELINE_NAMES.postgres[0]
/** Every migration a new store runs, in the order they run. */
const ALL = newStoreNames('postgres')
/** Kysely's migration lock on PostgreSQL: a session advisory lock with this key. */
const KYSELY_MIGRATION_LOCK = '3853314791062309107'

/** Runs `body` on a connection of its own, so nothing goes through the store. */
async function withClient<A>(url: string, body: (client: pg.Client) => Promise<A>): Promise<A> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await body(client)
  } finally {
    await client.end()
  }
}

/** The database's tables and applied migrations, read with a connection of its own. */
const inspect = (url: string): Promise<{ tables: string[]; migrations: string[] }> =>
  withClient(url, async (client) => {
    const tables = (
      await client.query<{ name: string }>('select table_name as name from information_schema.tables where table_schema = current_schema() order by 1')
    ).rows.map((row) => row.name)
    const applied = tables.includes('kysely_migration')
      ? (await client.query<{ name: string }>('select name from kysely_migration order by name')).rows.map((row) => row.name)
      : []
    return { tables, migrations: applied }
  })

/** A loopback port nothing listens on. */
const closedPort = freePort

/** Asserts a StoreError with a one-line message that names `location` and never `password`. */
function expectStoreError(error: unknown, location: string, password: string, says: RegExp): void {
  expect(error).toBeInstanceOf(StoreError)
  const { message } = error as StoreError
  expect(message).toContain(location)
  expect(message).not.toContain(password)
  expect(message).not.toMatch(/[\r\n]/)
  expect(message).toMatch(says)
}

describe('openStore on PostgreSQL', () => {
  it('creates every table and records every migration on a fresh database', async () => {
    const url = await tempLocation('postgres')
    expect((await inspect(url)).tables).toEqual([])
    const store = await openStore(url)
    await store.close()
    const schema = await inspect(url)
    expect(schema.tables).toEqual(expect.arrayContaining(TABLES))
    expect(schema.migrations).toEqual(ALL)
  })

  it('says it is PostgreSQL, has no SQLite connection, and names the database without its password', async () => {
    const url = await tempLocation('postgres', { migrated: true })
    const password = decodeURIComponent(new URL(url).password)
    expect(password.length).toBeGreaterThan(8)
    const store = await openStore(url)
    try {
      expect(store.dialect).toBe('postgres')
      expect(store.sqlite).toBeUndefined()
      expect(store.file).toBe(url.replace(`:${password}@`, ':***@'))
      expect(store.file).not.toContain(password)
    } finally {
      await store.close()
    }
    await expect(store.close()).resolves.toBeUndefined()
  })

  it('keeps the data and applies no migration twice when a database is reopened', async () => {
    const url = await tempLocation('postgres')
    const first = await openStore(url)
    await runCall(insertRun(first.db, run()))
    await first.close()

    const second = await openStore(url)
    try {
      expect(await runCall(getRun(second.db, 'run-1'))).toMatchObject({ id: 'run-1', status: 'running', steps: 0, lease_token: 0 })
    } finally {
      await second.close()
    }
    expect((await inspect(url)).migrations).toEqual(ALL)
  })

  it('opens an up-to-date database with one query, never waiting on the migration lock', async () => {
    const fresh = await tempLocation('postgres')
    const migrated = await tempLocation('postgres', { migrated: true })
    await withClient(migrated, async (locker) => {
      await locker.query(`select pg_advisory_lock(${KYSELY_MIGRATION_LOCK})`)
      // The migrator would wait here: a fresh database does not open while the lock is held...
      let freshOpened = false
      const opening = openStore(fresh).then((store) => {
        freshOpened = true
        return store
      })
      // ...but an up-to-date one opens at once.
      const store = await openStore(migrated)
      await store.close()
      expect(freshOpened).toBe(false)
      await locker.query(`select pg_advisory_unlock(${KYSELY_MIGRATION_LOCK})`)
      await (await opening).close()
    })
    expect((await inspect(fresh)).migrations).toEqual(ALL)
  })

  it('migrates a fresh database once when several stores of one process open it at once', async () => {
    const url = await tempLocation('postgres')
    const stores = await Promise.all(Array.from({ length: 4 }, () => openStore(url)))
    await Promise.all(stores.map((store) => store.close()))
    expect((await inspect(url)).migrations).toEqual(ALL)
  })

  it('migrates a fresh database once when several processes open it at the same moment', async () => {
    const url = await tempLocation('postgres')
    await openAtOnce(url)

    const schema = await inspect(url)
    expect(schema.migrations).toEqual(ALL)
    expect(schema.tables).toEqual(expect.arrayContaining(TABLES))
  })

  it('names the failing migration and leaves the schema as it was when a migration fails', async () => {
    const url = await tempLocation('postgres')
    await withClient(url, (client) => client.query('create table runs (legacy text)'))

    const error = await rejectionOf(openStore(url))
    expectStoreError(
      error,
      url.replace(/:[^:@/]+@/, ':***@'),
      decodeURIComponent(new URL(url).password),
      new RegExp(`^Migration ${INITIAL} failed on the store`)
    )
    // All or nothing: the migrations ran in one transaction. (Kysely's bookkeeping tables are
    // created before it, and stay, empty.)
    const schema = await inspect(url)
    expect(schema.tables).toEqual(['kysely_migration', 'kysely_migration_lock', 'runs'])
    expect(schema.migrations).toEqual([])
  })

  it('refuses a database that a newer version migrated past what this version knows', async () => {
    const url = await tempLocation('postgres', { migrated: true })
    await withClient(url, (client) =>
      client.query("insert into kysely_migration (name, timestamp) values ('2099-01-01T000000-future', '2099-01-01T00:00:00.000Z')")
    )
    const error = await rejectionOf(openStore(url))
    expect(error).toBeInstanceOf(StoreError)
    expect((error as StoreError).message).toContain('2099-01-01T000000-future')
    expect((error as StoreError).message).not.toContain(new URL(url).password)
  })

  it('gives bigint and numeric results as numbers through its own pool only, leaving pg’s global parsers alone', async () => {
    const url = await tempLocation('postgres', { migrated: true })
    const store = await openStore(url)
    try {
      const query = sql<{ big: unknown; n: unknown; num: unknown }>`select 1764417600000::bigint as big, count(*) as n, 2.5::numeric as num from runs`
      expect((await query.execute(store.db)).rows).toEqual([{ big: 1764417600000, n: 0, num: 2.5 }])
      const raw = await withClient(url, async (client) => (await client.query('select 1764417600000::bigint as big, count(*) as n from runs')).rows)
      expect(raw).toEqual([{ big: '1764417600000', n: '0' }])
      expect(pg.types.getTypeParser(20, 'text')('7')).toBe('7')
    } finally {
      await store.close()
    }
  })

  describe('rejects with a one-line StoreError that names the location without its password', () => {
    const password = 's3cret-Pa55word'

    it('when nothing listens at the address', async () => {
      const port = await closedPort()
      for (const host of ['127.0.0.1', 'localhost']) {
        const url = `postgres://agentvisor:${password}@${host}:${port}/runs`
        const error = await rejectionOf(openStore(url))
        expectStoreError(error, `postgres://agentvisor:***@${host}:${port}/runs`, password, /ECONNREFUSED/)
      }
    })

    it('when the URL cannot be parsed', async () => {
      const url = `postgresql://agentvisor:${password}@db.example:port/runs`
      const error = await rejectionOf(openStore(url))
      expectStoreError(error, 'postgresql://agentvisor:***@db.example:port/runs', password, /not a valid PostgreSQL URL/)
    })

    it('when the password is wrong', async () => {
      const url = databaseUrl('postgres').replace(/:[^:@/]+@/, `:${password}@`)
      const error = await rejectionOf(openStore(url))
      expectStoreError(error, url.replace(password, '***'), password, /password authentication failed/)
    })

    it('when the database does not exist', async () => {
      const url = databaseUrl('agentvisor_no_such_database')
      const real = decodeURIComponent(new URL(url).password)
      const error = await rejectionOf(openStore(url))
      expectStoreError(error, url.replace(real, '***'), real, /does not exist/)
    })
  })
})
