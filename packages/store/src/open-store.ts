import { accessSync, constants, existsSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { Kysely, Migrator, PostgresDialect, sql } from 'kysely'
import type { Pool } from 'pg'
import type { Database } from './database.js'
import type { StoreDialect } from './dialect.js'
import { StoreError } from './errors.js'
import { storeMigrationProvider } from './migrations/index.js'
import { createPostgresPool } from './postgres/postgres-pool.js'
import { isPostgresUrl, redactPassword } from './postgres/postgres-location.js'
import { isCurrentSchema, isKnownMigration } from './migrations/names.js'
import { appliedMigrations, BUSY_TIMEOUT_MS, openReadOnlySqlite } from './sqlite/sqlite-reader.js'
import { useWriterPragmas } from './sqlite/connection-pragmas.js'
import { cacheStatements } from './sqlite/statement-cache.js'
import { ImmediateSqliteDialect } from './sqlite/immediate-sqlite-dialect.js'
import { withTextCodec } from './text-codec-dialect.js'

/**
 * An open, migrated store. On SQLite, one per database file per process: better-sqlite3 is
 * synchronous. On PostgreSQL, one per process and server: it holds a connection pool.
 */
export interface Store {
  readonly db: Kysely<Database>
  /** Which database `db` talks to. */
  readonly dialect: StoreDialect
  /**
   * The SQLite connection under `db`, for the run driver's synchronous hot path (prepared
   * statements, see `sqlite/sqlite-run-writer.ts`); undefined on other dialects.
   */
  readonly sqlite: BetterSqlite3.Database | undefined
  /**
   * The `pg` pool under `db`, for the run driver's hot path (one statement a commit, see
   * `postgres/postgres-run-writer.ts`); undefined on SQLite.
   */
  readonly pool: Pool | undefined
  /**
   * Where the store is, fit to print: the absolute path of the database file, `:memory:`, or a
   * PostgreSQL URL with its password shown as `***` (so it cannot be used to reconnect).
   */
  readonly file: string
  /** Closes the database (or the pool); safe to call more than once. */
  close(): Promise<void>
}

/**
 * Opens the store at `location` and applies every pending migration, all or nothing: a new store
 * its dialect's baseline, a store made before the baselines the rest of the chain, then either the
 * migrations added since (migrations/index.ts `storeMigrationProvider`; docs/deploy.md, "Migrations").
 *
 * - A `postgres://` or `postgresql://` URL opens a connection pool to that PostgreSQL database.
 * - Anything else is a SQLite file, created with its folder if need be and switched to WAL, or
 *   `:memory:`.
 *
 * Rejects with a `StoreError` whose one-line message names the location (password redacted)
 * and, when one fails, the migration.
 *
 * @example
 * const store = await openStore(resolveDbPath(flags.db))
 * try { await Effect.runPromise(listRuns(store.db, { status: 'running' })) } finally { await store.close() }
 */
export async function openStore(location: string, options: OpenStoreOptions = {}): Promise<Store> {
  if (isPostgresUrl(location)) return openPostgresStore(location)
  const readOnly = options.readOnly ?? false
  if (readOnly !== false && location !== ':memory:') {
    const resolved = path.resolve(location)
    if (readOnly === true || !canWrite(resolved)) {
      const store = await openReadOnlySqliteStore(resolved, readOnly === true)
      if (store !== undefined) return store
    }
  }
  return openSqliteStore(location)
}

/** How `openStore` opens a SQLite store (a PostgreSQL one is opened alike either way). */
export interface OpenStoreOptions {
  /**
   * `true`: read-only, for commands that only read (`runs`, `show`); a store that needs migrating
   * is opened writable to migrate it, unless its location cannot be written, which is an error.
   * `'if-unwritable'`: writable where the location can be written, read-only elsewhere (the
   * inspector, whose decisions write). Default `false`: writable, created and migrated.
   */
  readonly readOnly?: boolean | 'if-unwritable'
}

/**
 * An existing, current store opened read-only (docs/cli.md, "Read-only stores"), its schema
 * checked with one query and no migration. Undefined when a writable open should handle it
 * instead: the file is missing, or it needs migrating and can be migrated here.
 */
async function openReadOnlySqliteStore(file: string, writableFallback: boolean): Promise<Store | undefined> {
  const writable = canWrite(file)
  if (!existsSync(file)) {
    if (writable) return undefined
    throw new StoreError({ message: `There is no store at ${file}, and its folder is read-only` })
  }
  let sqlite: BetterSqlite3.Database
  let applied: string[]
  try {
    sqlite = openReadOnlySqlite(file)
  } catch (cause) {
    if (writableFallback && writable) return undefined
    throw new StoreError({ message: `Cannot open the store ${file} read-only: ${messageOf(cause)}`, cause })
  }
  try {
    applied = appliedMigrations(sqlite)
  } catch (cause) {
    sqlite.close()
    if (writable) return undefined // not a store yet, or not one: the writable open reports it
    throw new StoreError({ message: `Cannot open the store ${file}: ${messageOf(cause)}`, cause })
  }
  if (!isCurrentSchema(applied, 'sqlite')) {
    sqlite.close()
    if (writable) return undefined
    const newer = applied.some((name) => !isKnownMigration(name))
    throw new StoreError({
      message: newer
        ? `The store ${file} was migrated by a newer agentvisor; upgrade this one to read it`
        : `The store ${file} is read-only and was written by an older agentvisor: it must be migrated first by a command that writes (run, resume, approve) where it is writable`
    })
  }
  const db = new Kysely<Database>({
    dialect: withTextCodec(new ImmediateSqliteDialect({ database: cacheStatements(sqlite) }))
  })
  return { db, dialect: 'sqlite', sqlite, pool: undefined, file, close: closeOnce(db) }
}

/**
 * Whether this process may write the store at `file` and the files SQLite keeps beside it
 * (`-wal`, `-shm`): its folder, and the file itself when it exists. A read-only mount says no
 * even to root (EROFS), as does an immutable file (EPERM).
 */
function canWrite(file: string): boolean {
  let target = existsSync(file) ? file : path.dirname(file)
  // A folder yet to be created is writable when its nearest existing ancestor is.
  while (!existsSync(target) && path.dirname(target) !== target) target = path.dirname(target)
  try {
    accessSync(target, constants.W_OK)
    if (target === file) accessSync(path.dirname(file), constants.W_OK)
    return true
  } catch {
    return false
  }
}

async function openSqliteStore(file: string): Promise<Store> {
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
    dialect: withTextCodec(new ImmediateSqliteDialect({ database: cacheStatements(sqlite) }))
  })

  try {
    await configure(sqlite)
    // Any failure of the quick look (no table yet, not a database at all) is left to the full
    // migration, which reports it properly.
    if (!(await isUpToDate(db, 'sqlite').catch(() => false))) await migrateSqlite(db, sqlite, resolved)
  } catch (cause) {
    await db.destroy()
    sqlite.close() // Kysely closes only a database it has initialised; this covers a failed pragma.
    if (cause instanceof StoreError) throw cause
    throw new StoreError({ message: `Cannot open the store ${resolved}: ${messageOf(cause)}`, cause })
  }

  return { db, dialect: 'sqlite', sqlite, pool: undefined, file: resolved, close: closeOnce(db) }
}

async function openPostgresStore(url: string): Promise<Store> {
  const location = redactPassword(url)
  const fail = (cause: unknown): StoreError => new StoreError({ message: `Cannot open the store ${location}: ${redactFrom(messageOf(cause), url)}`, cause })

  // `pg` parses the URL lazily, at the first connection; a malformed one fails here instead,
  // before any pool exists.
  if (!isParsableUrl(url)) throw fail(new Error('not a valid PostgreSQL URL'))
  let db: Kysely<Database> | undefined
  let pool: Pool
  try {
    pool = await createPostgresPool(url)
    db = new Kysely<Database>({ dialect: withTextCodec(new PostgresDialect({ pool })) })
    if (!(await isUpToDate(db, 'postgres').catch(rethrowUnlessUndefinedTable))) await migratePostgres(db, location)
  } catch (cause) {
    await db?.destroy().catch(() => undefined)
    if (cause instanceof StoreError) throw cause
    throw fail(cause)
  }
  return { db, dialect: 'postgres', sqlite: undefined, pool, file: location, close: closeOnce(db) }
}

/**
 * Whether `pg` can read the URL. Like its parser (pg-connection-string), this accepts an empty
 * host before the path, as in `postgres://app@/runs?host=/var/run/postgresql` (a Unix socket).
 */
function isParsableUrl(url: string): boolean {
  for (const candidate of [url, url.replace('@/', '@localhost/')]) {
    try {
      new URL(candidate)
      return true
    } catch {
      // try the next form
    }
  }
  return false
}

const closeOnce = (db: Kysely<Database>): (() => Promise<void>) => {
  let closing: Promise<void> | undefined
  return () => (closing ??= db.destroy())
}

/**
 * Whether the store already has exactly the migrations this version knows (the newest one
 * included), read with one cheap query, so that opening an up-to-date store (every CLI command)
 * skips the migrator, which introspects the schema and takes a lock. Anything else (a fresh
 * store, a pending migration, a newer version's migration, which the migrator then refuses) goes
 * the long way.
 */
async function isUpToDate(db: Kysely<Database>, dialect: StoreDialect): Promise<boolean> {
  const rows = await (db as unknown as Kysely<{ kysely_migration: { name: string } }>).selectFrom('kysely_migration').select('name').execute()
  return isCurrentSchema(
    rows.map((row) => row.name),
    dialect
  )
}

/** A fresh PostgreSQL database has no `kysely_migration` yet (42P01); anything else is real. */
const rethrowUnlessUndefinedTable = (error: unknown): false => {
  if ((error as { code?: unknown } | null)?.code === '42P01') return false
  throw error
}

async function configure(sqlite: BetterSqlite3.Database): Promise<void> {
  // WAL lets readers (`runs`, the inspector) go on while a run writes.
  await intoWal(sqlite)
  useWriterPragmas(sqlite, BUSY_TIMEOUT_MS)
}

/**
 * Switches a file into WAL mode. Switching needs the file to itself for a moment, and SQLite
 * answers SQLITE_BUSY at once, without its busy timeout, when another process has a fresh file
 * open in the middle of its own switch or first migration (several processes opening a new store
 * at the same moment). So the switch is asked again, a few milliseconds apart, within the busy
 * timeout; once the file is in WAL mode the pragma is a no-op that never waits.
 */
async function intoWal(sqlite: BetterSqlite3.Database): Promise<void> {
  const deadline = Date.now() + BUSY_TIMEOUT_MS
  for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
    try {
      sqlite.pragma('journal_mode = WAL')
      return
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code !== 'SQLITE_BUSY' || Date.now() + wait > deadline) throw error
      await new Promise((resolve) => setTimeout(resolve, wait))
    }
  }
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
async function migrateSqlite(db: Kysely<Database>, sqlite: BetterSqlite3.Database, file: string): Promise<void> {
  // The migrator holds Kysely's one connection while it asks its provider (after creating its
  // table): the count goes straight to SQLite.
  const provider = storeMigrationProvider('sqlite', async (names) =>
    Number(sqlite.prepare('select count(*) from kysely_migration where name in (select value from json_each(?))').pluck().get(JSON.stringify(names)))
  )
  const migrator = new Migrator({ db, provider, disableTransactions: true })
  sqlite.exec('begin immediate')
  let outcome: Awaited<ReturnType<Migrator['migrateToLatest']>>
  // better-sqlite3 opens in SQLite's defensive mode, which forbids `writable_schema`: one migration
  // loosens a CHECK the documented way through it (2026-12-02T090000). Off for the batch only.
  sqlite.unsafeMode(true)
  try {
    outcome = await migrator.migrateToLatest()
  } catch (error) {
    outcome = { error }
  } finally {
    sqlite.unsafeMode(false)
  }
  if (outcome.error === undefined) {
    sqlite.exec('commit')
    return
  }
  // SQLite may already have rolled back on its own (e.g. after SQLITE_FULL).
  if (sqlite.inTransaction) sqlite.exec('rollback')
  throw migrationError(outcome, file)
}

/**
 * Runs every pending migration with Kysely's migrator as it is meant for PostgreSQL: on one
 * connection it takes a session advisory lock (`pg_advisory_lock`), then applies the pending
 * migrations in one transaction, commits, and only then unlocks. Another opener, on this host
 * or any other, waits on the lock and then finds nothing left to do; a failing migration rolls
 * the whole batch back. (Creating Kysely's own two bookkeeping tables happens before the lock;
 * the migrator tolerates losing that race.)
 */
async function migratePostgres(db: Kysely<Database>, location: string): Promise<void> {
  const provider = storeMigrationProvider('postgres', async (names) => {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from kysely_migration where name in (${sql.join(names)})`.execute(db)
    return Number(rows[0]?.n)
  })
  const outcome = await new Migrator({ db, provider }).migrateToLatest()
  if (outcome.error !== undefined) throw migrationError(outcome, location)
}

function migrationError(outcome: Awaited<ReturnType<Migrator['migrateToLatest']>>, location: string): StoreError {
  const failed = outcome.results?.find((result) => result.status === 'Error')
  const message =
    failed === undefined
      ? `Cannot migrate the store ${location}: ${messageOf(outcome.error)}`
      : `Migration ${failed.migrationName} failed on the store ${location}: ${messageOf(outcome.error)}`
  return new StoreError({ message, cause: outcome.error })
}

/**
 * A driver error as one line. Node reports a refused connection to a name with several addresses
 * (`localhost`: ::1 and 127.0.0.1) as an AggregateError with an empty message; its parts say it.
 */
function messageOf(cause: unknown): string {
  let text: string
  if (cause instanceof AggregateError && cause.message === '') text = cause.errors.map(messageOf).join('; ')
  else if (cause instanceof Error) text = cause.message === '' ? String((cause as { code?: unknown }).code ?? cause.name) : cause.message
  else text = String(cause)
  return text.replace(/\s*[\r\n]+\s*/g, ' ').trim()
}

/** Belt and braces: no driver message should quote the password, and none will through us. */
function redactFrom(message: string, url: string): string {
  let password: string
  try {
    password = decodeURIComponent(new URL(url).password)
  } catch {
    return message
  }
  return password.length >= 3 ? message.split(password).join('***') : message
}
