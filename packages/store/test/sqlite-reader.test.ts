import { existsSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { insertRun, migrations, openStore } from '@agentvisor/store'
import { BASELINE_NAMES, CHAIN_NAMES, LATER_NAMES } from '../src/migrations/names.js'
import { baselineMigrations, laterMigrations } from '../src/migrations/index.js'
import { openCurrentSqlite } from '@agentvisor/store/runs'
import { olderSqliteStore, run, tempDir } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

describe('openCurrentSqlite, the read path of `agentvisor runs`', () => {
  it('knows exactly the migrations the migrator runs, in their order', () => {
    expect(CHAIN_NAMES).toEqual(Object.keys(migrations))
    expect([...CHAIN_NAMES].sort()).toEqual(CHAIN_NAMES)
    for (const dialect of ['sqlite', 'postgres'] as const) expect(BASELINE_NAMES[dialect]).toEqual(Object.keys(baselineMigrations[dialect]))
    expect(LATER_NAMES).toEqual(Object.keys(laterMigrations))
    // A later migration runs after a baseline and after the chain alike: it sorts after every one of them.
    const last = [...CHAIN_NAMES, ...Object.values(BASELINE_NAMES).flat()].sort().at(-1)!
    expect(LATER_NAMES.filter((name) => name <= last)).toEqual([])
    expect([...LATER_NAMES].sort()).toEqual(LATER_NAMES)
  })

  it('opens an up-to-date store and reads what the store wrote', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    const store = await openStore(file)
    await runCall(insertRun(store.db, run({ id: 'run-a' })))
    await store.close()

    const sqlite = openCurrentSqlite(file)
    expect(sqlite).toBeDefined()
    try {
      expect(sqlite!.prepare('SELECT id, status FROM runs').all()).toEqual([{ id: 'run-a', status: 'running' }])
    } finally {
      sqlite!.close()
    }
  })

  it('leaves a missing file uncreated, for openStore to create', () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    expect(openCurrentSqlite(file)).toBeUndefined()
    expect(existsSync(file)).toBe(false)
  })

  it('leaves a store missing a migration, a newer one and a file that is no database to openStore', async () => {
    const dir = tempDir()
    const outdated = path.join(dir, 'outdated.db')
    await olderSqliteStore(outdated)
    expect(openCurrentSqlite(outdated)).toBeUndefined()
    // The long way then applies what is missing.
    await (await openStore(outdated)).close()
    const sqlite = openCurrentSqlite(outdated)
    expect(sqlite).toBeDefined()
    sqlite!.close()

    const newer = path.join(dir, 'newer.db')
    await (await openStore(newer)).close()
    const raw2 = new BetterSqlite3(newer)
    raw2.prepare('INSERT INTO kysely_migration (name, timestamp) VALUES (?, ?)').run('2099-01-01T000000-future', '2099-01-01T00:00:00.000Z')
    raw2.close()
    expect(openCurrentSqlite(newer)).toBeUndefined()

    const text = path.join(dir, 'text.db')
    writeFileSync(text, 'this is not a database, just text long enough to fill a header page.'.repeat(20))
    expect(openCurrentSqlite(text)).toBeUndefined()
  })
})
