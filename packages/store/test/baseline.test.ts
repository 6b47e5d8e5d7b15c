import * as path from 'node:path'
import { type Migration, type MigrationProvider, Migrator, sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { openStore, type Store } from '@agentvisor/store'
import { storeMigrationProvider } from '../src/migrations/index.js'
import { BASELINE_NAMES, CHAIN_NAMES } from '../src/migrations/names.js'
import { postgresCatalog, sqliteNormalizedSchema } from './support/schema-dump.js'
import { DIALECTS, migrateByChain, type TestDialect, tempDir, tempLocation } from './support/temp-store.js'

/** A fresh location of `dialect`, with nothing in it. */
const emptyLocation = async (dialect: TestDialect): Promise<string> => (dialect === 'sqlite' ? path.join(tempDir(), 'agentvisor.db') : tempLocation('postgres'))

/** The names a store's `kysely_migration` holds, sorted. */
const appliedNames = async (store: Store): Promise<string[]> =>
  (await sql<{ name: string }>`select name from kysely_migration order by name`.execute(store.db)).rows.map((row) => row.name)

const schemaOf = (dialect: TestDialect, location: string): Promise<unknown> =>
  dialect === 'sqlite' ? Promise.resolve(sqliteNormalizedSchema(location)) : postgresCatalog(location)

/** Counts the chain's names in the store's `kysely_migration`, on the store's own SQLite connection or pool (as openStore does). */
const appliedChain =
  (store: Store) =>
  async (names: ReadonlyArray<string>): Promise<number> => {
    if (store.sqlite !== undefined) {
      return Number(
        store.sqlite.prepare('select count(*) from kysely_migration where name in (select value from json_each(?))').pluck().get(JSON.stringify(names))
      )
    }
    const { rows } = await store.pool!.query<{ n: number }>('select count(*)::int as n from kysely_migration where name = any($1)', [names])
    return Number(rows[0]?.n)
  }

// docs/deploy.md, "Migrations": a new store runs its dialect's baseline, an older one walks the
// chain; both must end with the very same schema, or a store's behaviour would depend on its age.
describe.each(DIALECTS)('a new %s store', (dialect) => {
  it('runs only its baseline and gets the very schema a store upgraded through the whole chain has', async () => {
    const fresh = await emptyLocation(dialect)
    const store = await openStore(fresh)
    try {
      expect(await appliedNames(store)).toEqual(BASELINE_NAMES[dialect])
    } finally {
      await store.close()
    }

    const upgraded = await emptyLocation(dialect)
    await migrateByChain(upgraded)
    const reopened = await openStore(upgraded)
    try {
      expect(await appliedNames(reopened)).toEqual(CHAIN_NAMES)
    } finally {
      await reopened.close()
    }

    const baseline = await schemaOf(dialect, fresh)
    expect(await schemaOf(dialect, upgraded)).toEqual(baseline)
    // Every kind of object is compared: none of them is missing from the dump.
    if (dialect === 'sqlite') {
      const kinds = new Set((baseline as Array<{ type: string }>).map((object) => object.type))
      expect([...kinds].sort()).toEqual(['index', 'table', 'trigger', 'view'])
    } else {
      const catalog = baseline as Record<string, unknown[]>
      expect(Object.entries(catalog).filter(([, rows]) => rows.length === 0)).toEqual([])
      expect(catalog['functions']!.map((f) => (f as { name: string }).name)).toEqual(['agentvisor_commit', 'agentvisor_delete_step_rows'])
    }
    // The comparison sees the schema: a store missing a migration's work differs.
    const older = await emptyLocation(dialect)
    await migrateByChain(older, { to: '2026-12-02T090000-awaiting-input' })
    expect(await schemaOf(dialect, older)).not.toEqual(baseline)
  })

  it('takes a migration added after the baseline, as a store made by the chain does', async () => {
    const later: Record<string, Migration> = {
      '2099-01-01T000000-later': { up: async (db) => void (await sql`create table later_probe (id integer primary key)`.execute(db)) }
    }
    const withLater = (store: Store): MigrationProvider => ({
      getMigrations: async () => ({ ...(await storeMigrationProvider(dialect, appliedChain(store)).getMigrations()), ...later })
    })
    for (const made of ['baseline', 'chain'] as const) {
      const location = await emptyLocation(dialect)
      if (made === 'chain') await migrateByChain(location)
      const store = await openStore(location)
      try {
        store.sqlite?.unsafeMode(true)
        const { error, results } = await new Migrator({ db: store.db, provider: withLater(store) }).migrateToLatest()
        expect(error, made).toBeUndefined()
        expect(
          results?.map((r) => [r.migrationName, r.status]),
          made
        ).toEqual([['2099-01-01T000000-later', 'Success']])
        expect(await appliedNames(store), made).toEqual([...(made === 'baseline' ? BASELINE_NAMES[dialect] : CHAIN_NAMES), '2099-01-01T000000-later'])
        await sql`insert into later_probe (id) values (1)`.execute(store.db)
      } finally {
        await store.close()
      }
    }
  })
})
