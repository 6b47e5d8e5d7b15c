import type BetterSqlite3 from 'better-sqlite3'

/**
 * The settings every connection of a store's writers has, on a file already in WAL mode (the
 * store's own, open-store.ts; the commit thread's, commit-thread-worker.ts): NORMAL is durable
 * across process crashes in WAL mode and only risks the last commits on power loss; foreign keys
 * enforced; SQLite's busy timeout.
 */
export const useWriterPragmas = (sqlite: BetterSqlite3.Database, busyTimeoutMs: number): void => {
  sqlite.pragma('synchronous = NORMAL')
  sqlite.pragma('foreign_keys = ON')
  sqlite.pragma(`busy_timeout = ${busyTimeoutMs}`)
}
