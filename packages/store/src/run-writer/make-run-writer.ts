import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Pool } from 'pg'
import type { Database } from '../database.js'
import type { Store } from '../open-store.js'
import { rideOutStoreOutages, type StoreOutagePolicy } from '../outage/outage-writer.js'
import { postgresRawWriter } from '../postgres/postgres-run-writer.js'
import { sqliteRawWriter } from '../sqlite/sqlite-run-writer.js'
import { kyselyRawWriter, type RawRunWriter, type RunWriter } from './run-writer.js'
import { runWriterOf } from './run-writer-of.js'

/** What a run writer is made of: the store's Kysely instance and the connection under it. */
export type WriterStore = Pick<Store, 'db' | 'sqlite' | 'pool'>

/** The SQLite `RunWriter`: prepared statements in synchronous transactions, answered at once (sqlite-run-writer.ts). */
export const sqliteRunWriter = (db: Kysely<Database>, sqlite: BetterSqlite3.Database): RunWriter => runWriterOf(sqliteRawWriter(db, sqlite))

/** The PostgreSQL `RunWriter`: one statement a call on the store's `pg` pool (postgres-run-writer.ts). */
export const postgresRunWriter = (pool: Pool): RunWriter => runWriterOf(postgresRawWriter(pool))

/** The `RunWriter` of any dialect: each call one Kysely transaction through the repositories (run-writer.ts). */
export const kyselyRunWriter = (db: Kysely<Database>): RunWriter => runWriterOf(kyselyRawWriter(db))

const rawWriterOf = (store: WriterStore): RawRunWriter =>
  store.sqlite !== undefined ? sqliteRawWriter(store.db, store.sqlite) : store.pool !== undefined ? postgresRawWriter(store.pool) : kyselyRawWriter(store.db)

/**
 * The fastest `RunWriter` the store allows: prepared statements on SQLite, one statement a call
 * on PostgreSQL's pool, Kysely elsewhere.
 */
export const makeRunWriter = (store: WriterStore): RunWriter => runWriterOf(rawWriterOf(store))

/** A writer that rides out store outages, and how a closing process stops its calls from waiting any longer. */
export interface OutageRidingWriter extends RunWriter {
  /** Calls waiting for the store fail at once (as past the limit): the process is closing. */
  readonly stopWaiting: () => void
}

/**
 * `makeRunWriter`'s writer riding out store outages under `policy` (docs/durability.md, "A store
 * outage"; outage-writer.ts): a call that fails for an outage is made again until the store answers
 * or the outage has lasted `policy.limitMs`. Only for a store whose calls answer later
 * (PostgreSQL): SQLite's synchronous hot path has no outage to ride out.
 */
export const outageRidingWriter = (store: WriterStore, policy: StoreOutagePolicy): OutageRidingWriter => {
  const riding = rideOutStoreOutages(rawWriterOf(store), policy)
  return { ...runWriterOf(riding), stopWaiting: riding.stopWaiting }
}
