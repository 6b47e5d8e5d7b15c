import { existsSync } from 'node:fs'
import BetterSqlite3 from 'better-sqlite3'
import { isCurrentSchema } from '../migrations/names.js'

/** How long a SQLite connection of the store waits for another process's write lock before failing with SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000

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
    if (isCurrentSchema(sqlite.prepare('SELECT name FROM kysely_migration').pluck().all() as string[])) return sqlite
  } catch {
    // not a store, or not one this version reads as it is: left to openStore
  }
  sqlite?.close()
  return undefined
}
