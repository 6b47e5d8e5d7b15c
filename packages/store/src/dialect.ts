import { PostgresAdapter } from 'kysely'
import type { Executor } from './executor.js'

/** The SQL databases the store runs on: SQLite embedded, PostgreSQL shared by many machines. */
export type StoreDialect = 'sqlite' | 'postgres'

/**
 * The dialect behind a `Kysely` or a transaction of it, read from its adapter, so a repository
 * can take the few branches the two databases need (a row lock PostgreSQL has and SQLite lacks)
 * without being told. A subclass of either dialect (ours starts SQLite transactions with
 * `BEGIN IMMEDIATE`) keeps its adapter, so it is recognised too.
 */
export const dialectOf = (db: Executor): StoreDialect => (db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite')
