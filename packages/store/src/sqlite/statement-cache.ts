import type { SqliteDatabase, SqliteStatement } from 'kysely'

/** How many distinct query texts stay prepared; the repositories use a few dozen. */
const DEFAULT_CAPACITY = 256

/**
 * Wraps a better-sqlite3 database so that `prepare` reuses the statement already compiled for
 * the same SQL text. Kysely's SQLite driver prepares every query afresh, and a run writes a
 * transition, a receipt and a run update per step: compiling those each time is most of the
 * cost of a small write. Reuse is safe because Kysely serialises all use of the single
 * connection, so one statement is never stepped by two queries at once. The cache is an LRU so
 * that ad-hoc query texts cannot grow it without bound.
 */
export function cacheStatements(database: SqliteDatabase, capacity = DEFAULT_CAPACITY): SqliteDatabase {
  const statements = new Map<string, SqliteStatement>()
  return {
    prepare(sql: string): SqliteStatement {
      const cached = statements.get(sql)
      if (cached !== undefined) {
        // Re-insert to mark it most recently used (a Map iterates in insertion order).
        statements.delete(sql)
        statements.set(sql, cached)
        return cached
      }
      const statement = database.prepare(sql)
      statements.set(sql, statement)
      if (statements.size > capacity) {
        const oldest = statements.keys().next()
        if (oldest.done !== true) statements.delete(oldest.value)
      }
      return statement
    },
    close(): void {
      statements.clear()
      database.close()
    }
  }
}
