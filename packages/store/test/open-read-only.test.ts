import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { insertRun, listRuns, openStore } from '@agentvisor/store'
import { newStoreNames, UPGRADED_STORE_NAMES } from '../src/migrations/names.js'
import { olderSqliteStore, run, tempDir } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

const migrationsOf = (file: string): string[] => {
  const raw = new BetterSqlite3(file, { readonly: true })
  try {
    return raw.prepare('SELECT name FROM kysely_migration ORDER BY name').pluck().all() as string[]
  } finally {
    raw.close()
  }
}

describe('openStore read-only (docs/cli.md, "Read-only stores")', () => {
  it('reads a current store through a connection that cannot write', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    const writable = await openStore(file)
    await runCall(insertRun(writable.db, run({ id: 'run-a' })))
    await writable.close()

    const store = await openStore(file, { readOnly: true })
    try {
      // A cleanly closed store (no -wal, no -shm) in a writable folder is read through a connection
      // that never writes (query_only), so that closing it leaves no -wal or -shm behind.
      expect(store.sqlite!.readonly || store.sqlite!.pragma('query_only', { simple: true }) === 1).toBe(true)
      expect((await runCall(listRuns(store.db))).map((r) => r.id)).toEqual(['run-a'])
      await expect(runCall(insertRun(store.db, run({ id: 'run-b' })))).rejects.toThrow(/readonly/i)
    } finally {
      await store.close()
    }
  })

  it('migrates an older store where it can be written, then reads it', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    await olderSqliteStore(file)

    const store = await openStore(file, { readOnly: true })
    await store.close()
    expect(migrationsOf(file)).toEqual([...UPGRADED_STORE_NAMES])
  })

  it('creates a missing store where it can be written, as a writable open does', async () => {
    const file = path.join(tempDir(), 'new', 'agentvisor.db')
    const store = await openStore(file, { readOnly: true })
    try {
      expect(await runCall(listRuns(store.db))).toEqual([])
    } finally {
      await store.close()
    }
    expect(migrationsOf(file)).toEqual([...newStoreNames('sqlite')])
  })

  it('opens writable where it can write when asked for read-only only if the store is unwritable', async () => {
    const file = path.join(tempDir(), 'agentvisor.db')
    await (await openStore(file)).close()
    const store = await openStore(file, { readOnly: 'if-unwritable' })
    try {
      expect(store.sqlite!.readonly).toBe(false)
      await runCall(insertRun(store.db, run({ id: 'run-w' })))
      expect((await runCall(listRuns(store.db))).map((r) => r.id)).toEqual(['run-w'])
    } finally {
      await store.close()
    }
  })
})
