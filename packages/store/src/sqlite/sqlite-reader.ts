import { accessSync, constants, existsSync, statSync } from 'node:fs'
import * as path from 'node:path'
import { pathToFileURL } from 'node:url'
import BetterSqlite3 from 'better-sqlite3'
import { isCurrentSchema } from '../migrations/names.js'

/** How long a SQLite connection of the store waits for another process's write lock before failing with SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000

/**
 * An existing SQLite store opened with better-sqlite3 alone, for reading: no Kysely (some 260
 * modules) and no Effect are loaded, which is most of what `agentvisor runs` would otherwise
 * spend starting up. Opened read-only (`openReadOnlySqlite`), so it works on read-only media.
 *
 * Undefined unless `file` exists and holds exactly this version's migrations: a missing file, a
 * store that needs migrating (or is newer), anything that is not a store at all goes the long
 * way, through `openStore`, which creates, migrates or reports it properly.
 */
export function openCurrentSqlite(file: string): BetterSqlite3.Database | undefined {
  if (file === ':memory:' || !existsSync(file)) return undefined
  let sqlite: BetterSqlite3.Database | undefined
  try {
    sqlite = openReadOnlySqlite(file)
    if (isCurrentSchema(appliedMigrations(sqlite), 'sqlite')) return sqlite
  } catch {
    // not a store, or not one this version reads as it is: left to openStore
  }
  sqlite?.close()
  return undefined
}

/** The migrations a store has applied (`kysely_migration`); throws when it has none at all. */
export const appliedMigrations = (sqlite: BetterSqlite3.Database): string[] => sqlite.prepare('SELECT name FROM kysely_migration').pluck().all() as string[]

/**
 * Opens an existing SQLite file read-only: nothing is written to it or beside it that a reader
 * need not write, so it opens on a read-only mount, a write-protected folder or a CD alike
 * (docs/cli.md, "Read-only stores"). Throws SQLite's error when it cannot.
 *
 * A WAL-mode file is read through its `-shm` index. When the `-wal` and `-shm` files are there
 * (a writer is live, or died), SQLite reads them even if they cannot be written. When neither is
 * there (the last writer closed cleanly) and the folder is read-only, SQLite cannot create the
 * index and refuses to open, unless told the file is immutable: then it reads the database file
 * alone, which is complete, since no `-wal` is left to hold later commits.
 */
export function openReadOnlySqlite(file: string): BetterSqlite3.Database {
  allowUriFilenames()
  const open = (name: string): BetterSqlite3.Database => {
    const sqlite = new BetterSqlite3(name, { readonly: true, fileMustExist: true, timeout: BUSY_TIMEOUT_MS })
    try {
      // Opening is lazy: the first read opens the -wal and -shm files, or fails to.
      sqlite.pragma('schema_version')
      return sqlite
    } catch (error) {
      sqlite.close()
      throw error
    }
  }
  // A store left by a clean close has no -wal or -shm. A read-only connection to a WAL file would
  // create both and, unable to checkpoint, leave them behind; a read-write connection that never
  // writes (query_only) removes them again when it closes last, as SQLite does for any writer.
  // It still takes part in SQLite's locking, so it reads what a writer beside it commits.
  if (!existsSync(`${file}-wal`) && !existsSync(`${file}-shm`) && writable(file)) {
    const sqlite = new BetterSqlite3(file, { fileMustExist: true, timeout: BUSY_TIMEOUT_MS })
    try {
      sqlite.pragma('query_only = ON')
      sqlite.pragma('schema_version')
      return sqlite
    } catch (error) {
      sqlite.close()
      throw error
    }
  }
  try {
    return open(file)
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'SQLITE_CANTOPEN' || !existsSync(file) || hasWal(file)) throw error
    return open(`${pathToFileURL(file).href}?immutable=1`)
  }
}

/** Whether this process may write `file` and create files beside it. */
const writable = (file: string): boolean => {
  try {
    accessSync(file, constants.W_OK)
    accessSync(path.dirname(file), constants.W_OK)
    return true
  } catch {
    return false
  }
}

const hasWal = (file: string): boolean => {
  try {
    return statSync(`${file}-wal`).size > 0
  } catch {
    return false
  }
}

/**
 * better-sqlite3 reads `file:` URIs (the only way to say `immutable=1`) only when
 * `SQLITE_USE_URI=1` is in the environment as its native addon loads, which is at the first
 * connection the process opens. Set for that moment alone, so that no child process inherits it.
 * Every path the store opens is absolute, so no path of ours starts with `file:`. When the addon
 * is already loaded without it, the immutable open fails and the caller reports SQLite's error.
 */
let urisAllowed = false
const allowUriFilenames = (): void => {
  if (urisAllowed) return
  urisAllowed = true
  if (process.env['SQLITE_USE_URI'] !== undefined) return
  process.env['SQLITE_USE_URI'] = '1'
  try {
    new BetterSqlite3(':memory:').close()
  } finally {
    delete process.env['SQLITE_USE_URI']
  }
}
