import { mkdir } from 'node:fs/promises'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { Kysely, Migrator } from 'kysely'
import type { Database } from './database.js'
import { StoreError } from './errors.js'
import { migrationProvider } from './migrations/index.js'
import { cacheStatements } from './sqlite/statement-cache.js'
import { ImmediateSqliteDialect } from './sqlite/immediate-sqlite-dialect.js'

/** How long a write waits for another process's lock before failing with SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 5000

/** An open, migrated store. One per database file per process: better-sqlite3 is synchronous. */
export interface Store {
  readonly db: Kysely<Database>
  /**
   * The SQLite connection under `db`, for the run driver's synchronous hot path (prepared
   * statements, see `sqlite/sqlite-run-writer.ts`); undefined on other dialects.
   */
  readonly sqlite: BetterSqlite3.Database | undefined
  /** The absolute path of the database file, or `:memory:`. */
  readonly file: string
  /** Closes the database; safe to call more than once. */
  close(): Promise<void>
}

/**
 * Opens (creating it and its folder if need be) the SQLite store at `file`, switches it to WAL,
 * and applies every pending migration in one transaction. Rejects with a `StoreError` naming the
 * file, and the migration when one fails; a failed migration leaves the schema as it was.
 *
 * @example
 * const store = await openStore(resolveDbPath(flags.db))
 * try { await listRuns(store.db, { status: 'running' }) } finally { await store.close() }
 */
export async function openStore(file: string): Promise<Store> {
  const inMemory = file === ':memory:'
  const resolved = inMemory ? file : path.resolve(file)
  if (!inMemory) {
    try {
      await mkdir(path.dirname(resolved), { recursive: true })
    } catch (cause) {
      throw new StoreError({ message: `Cannot create the folder of the store ${resolved}: ${messageOf(cause)}`, cause })
    }
  }

  let sqlite: BetterSqlite3.Database
  try {
    sqlite = new BetterSqlite3(resolved, { timeout: BUSY_TIMEOUT_MS })
  } catch (cause) {
    throw new StoreError({ message: `Cannot open the store ${resolved}: ${messageOf(cause)}`, cause })
  }
  const db = new Kysely<Database>({
    dialect: new ImmediateSqliteDialect({ database: cacheStatements(sqlite) })
  })

  try {
    configure(sqlite)
    await migrate(db, sqlite, resolved)
  } catch (cause) {
    await db.destroy()
    sqlite.close() // Kysely closes only a database it has initialised; this covers a failed pragma.
    if (cause instanceof StoreError) throw cause
    throw new StoreError({ message: `Cannot open the store ${resolved}: ${messageOf(cause)}`, cause })
  }

  let closed = false
  return {
    db,
    sqlite,
    file: resolved,
    close: async () => {
      if (closed) return
      closed = true
      await db.destroy()
    }
  }
}

function configure(sqlite: BetterSqlite3.Database): void {
  // WAL lets readers (`runs`, the inspector) go on while a run writes; NORMAL is durable across
  // process crashes in WAL mode and only risks the last commits on power loss.
  sqlite.pragma('journal_mode = WAL')
  sqlite.pragma('synchronous = NORMAL')
  sqlite.pragma('foreign_keys = ON')
  sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
}

/**
 * Runs every pending migration inside one `BEGIN IMMEDIATE` transaction. Kysely's migrator does
 * not wrap SQLite migrations in a transaction and its SQLite lock is a no-op, so on its own two
 * processes opening a fresh file at once would both create the tables, and a failing migration
 * would leave half a schema. SQLite's DDL is transactional: holding the write lock across the
 * whole batch makes the second process wait, then find nothing left to do.
 *
 * Inside one process, better-sqlite3 would wait for that lock synchronously, blocking the very
 * event loop the holder needs. That does not happen: every open first awaits `mkdir` (a real
 * I/O callback), and Kysely's SQLite driver settles each query at once, so a whole migration
 * runs between two I/O callbacks and opens of one file in one process never interleave (a test
 * holds this). The same holds for any Store: keep one per file per process, and never hold a
 * transaction open across real I/O.
 */
async function migrate(db: Kysely<Database>, sqlite: BetterSqlite3.Database, file: string): Promise<void> {
  const migrator = new Migrator({ db, provider: migrationProvider, disableTransactions: true })
  sqlite.exec('begin immediate')
  let outcome: Awaited<ReturnType<Migrator['migrateToLatest']>>
  try {
    outcome = await migrator.migrateToLatest()
  } catch (error) {
    outcome = { error }
  }
  if (outcome.error === undefined) {
    sqlite.exec('commit')
    return
  }
  // SQLite may already have rolled back on its own (e.g. after SQLITE_FULL).
  if (sqlite.inTransaction) sqlite.exec('rollback')
  const failed = outcome.results?.find((result) => result.status === 'Error')
  const message =
    failed === undefined
      ? `Cannot migrate the store ${file}: ${messageOf(outcome.error)}`
      : `Migration ${failed.migrationName} failed on the store ${file}: ${messageOf(outcome.error)}`
  throw new StoreError({ message, cause: outcome.error })
}

const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))
