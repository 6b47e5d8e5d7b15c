import { existsSync } from 'node:fs'
import BetterSqlite3 from 'better-sqlite3'
import { MIGRATION_NAMES } from '../migrations/names.js'

/** As long as `openStore` waits for another process's write lock. */
const BUSY_TIMEOUT_MS = 5000

/**
 * An existing SQLite store opened with better-sqlite3 alone, for reading: no Kysely (some 260
 * modules) and no Effect are loaded, which is most of what `agentvisor runs` would otherwise
 * spend starting up.
 *
 * Undefined unless `file` exists and holds exactly this version's migrations: a missing file, a
 * store that needs migrating (or is newer), anything that is not a store at all goes the long
 * way, through `openStore`, which creates, migrates or reports it properly.
 */
export function openCurrentSqlite(file: string): BetterSqlite3.Database | undefined {
  if (file === ':memory:' || !existsSync(file)) return undefined
  let sqlite: BetterSqlite3.Database | undefined
  try {
    sqlite = new BetterSqlite3(file, { fileMustExist: true, timeout: BUSY_TIMEOUT_MS })
    const names = sqlite.prepare('SELECT name FROM kysely_migration ORDER BY name').pluck().all() as string[]
    if (names.length === MIGRATION_NAMES.length && names.every((name, i) => name === MIGRATION_NAMES[i])) return sqlite
  } catch {
    // not a store, or not one this version reads as it is: left to openStore
  }
  sqlite?.close()
  return undefined
}
