import type { Store } from '../open-store.js'
import { sqliteRunWriter } from '../sqlite/sqlite-run-writer.js'
import { kyselyRunWriter, type RunWriter } from './run-writer.js'

/** The fastest `RunWriter` the store allows: prepared statements on SQLite, Kysely elsewhere. */
export const makeRunWriter = (store: Pick<Store, 'db' | 'sqlite'>): RunWriter =>
  store.sqlite !== undefined ? sqliteRunWriter(store.db, store.sqlite) : kyselyRunWriter(store.db)
