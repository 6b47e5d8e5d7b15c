import { existsSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { insertRun, migrations, openStore } from '@agentvisor/store'
import { MIGRATION_NAMES } from '../src/migrations/names.js'
import { openCurrentSqlite } from '@agentvisor/store/runs'
import { olderSqliteStore, run, tempDir } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

describe('openCurrentSqlite, the read path of `agentvisor runs`', () => {
  it('knows exactly the migrations the migrator runs, in their order', () => {
    expect(MIGRATION_NAMES).toEqual(Object.keys(migrations))
    expect([...MIGRATION_NAMES].sort()).toEqual(MIGRATION_NAMES)
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
