import BetterSqlite3 from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
// Internal module: not part of the package's exports, so it is imported from its source.
import { cacheStatements } from '../src/sqlite/statement-cache.js'

describe('statement cache', () => {
  it('reuses the prepared statement for the same SQL text', () => {
    const database = cacheStatements(new BetterSqlite3(':memory:'))
    try {
      const first = database.prepare('select 1 as one')
      expect(database.prepare('select 1 as one')).toBe(first)
      expect(database.prepare('select 2 as two')).not.toBe(first)
      expect(first.all([])).toEqual([{ one: 1 }])
    } finally {
      database.close()
    }
  })

  it('drops the least recently used statement once past its capacity', () => {
    const database = cacheStatements(new BetterSqlite3(':memory:'), 2)
    try {
      const a = database.prepare('select 1')
      const b = database.prepare('select 2')
      expect(database.prepare('select 1')).toBe(a) // now b is the least recently used
      database.prepare('select 3')
      expect(database.prepare('select 1')).toBe(a)
      expect(database.prepare('select 2')).not.toBe(b)
    } finally {
      database.close()
    }
  })

  it('closes the underlying database', () => {
    const raw = new BetterSqlite3(':memory:')
    cacheStatements(raw).close()
    expect(raw.open).toBe(false)
  })
})
