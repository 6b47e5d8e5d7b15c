import type { Store } from '../open-store.js'
import { postgresRunWriter } from '../postgres/postgres-run-writer.js'
import { sqliteRunWriter } from '../sqlite/sqlite-run-writer.js'
import { kyselyRunWriter, type RunWriter } from './run-writer.js'

/**
 * The fastest `RunWriter` the store allows: prepared statements on SQLite, one statement a call
 * on PostgreSQL's pool, Kysely elsewhere.
 */
export const makeRunWriter = (store: Pick<Store, 'db' | 'sqlite' | 'pool'>): RunWriter =>
  store.sqlite !== undefined ? sqliteRunWriter(store.db, store.sqlite) : store.pool !== undefined ? postgresRunWriter(store.pool) : kyselyRunWriter(store.db)
