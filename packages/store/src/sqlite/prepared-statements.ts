import type BetterSqlite3 from 'better-sqlite3'
import { encodeParams, encodeText } from '../text-codec.js'

type Params = ReadonlyArray<string | number | bigint | null>

/** Statements prepared once on a connection and cached by their SQL, and the row writes built on them. */
export interface PreparedStatements {
  /** A statement prepared once on the connection and cached by its SQL. */
  readonly statement: (sql: string) => BetterSqlite3.Statement
  /** `INSERT INTO table (the row's columns) VALUES (...)` then `conflict`, prepared once per table and column list. */
  readonly insert: (table: string, row: object, conflict?: string) => void
  /** `UPDATE table SET (set's columns) WHERE where`, `params` bound after them; the rows it changed. */
  readonly update: (table: string, set: object, where: string, params: Params) => number
}

/**
 * The cache of a run writer's statements on `sqlite`, for the writes the hot path never makes (a
 * run's creation, an approval, a lease) and the reads of a resume: each SQL text is prepared the
 * first time, then reused (the hot path's own statements are prepared once, up front:
 * step-writes.ts). Values are bound as the store holds them (`bindColumns`).
 */
export function preparedStatements(sqlite: BetterSqlite3.Database): PreparedStatements {
  const statements = new Map<string, BetterSqlite3.Statement>()
  const statement = (sql: string): BetterSqlite3.Statement => {
    let prepared = statements.get(sql)
    if (prepared === undefined) {
      prepared = sqlite.prepare(sql)
      statements.set(sql, prepared)
    }
    return prepared
  }
  const run = (sql: string, params: Params): number => statement(sql).run(...params).changes
  const insert = (table: string, row: object, conflict = ''): void => {
    const columns = Object.keys(row)
    const sql = `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})${conflict}`
    run(sql, bindColumns(columns, row))
  }
  const update = (table: string, set: object, where: string, params: Params): number => {
    const columns = Object.keys(set)
    const sql = `UPDATE ${table} SET ${columns.map((c) => `${c} = ?`).join(', ')} WHERE ${where}`
    return run(sql, [...bindColumns(columns, set), ...encodeParams(params)])
  }
  return { statement, insert, update }
}

/**
 * A row's values in `columns` order, bound as the store holds them (text encoded, see
 * text-codec.ts). `*_json` columns are left as they are: they hold `JSON.stringify` output, which
 * the encoding never changes, and a tool's long output would otherwise be scanned for nothing.
 */
const bindColumns = (columns: ReadonlyArray<string>, row: object): Array<string | number | bigint | null> =>
  columns.map((column) => {
    const value = (row as Record<string, unknown>)[column]
    return typeof value === 'string' && !column.endsWith('_json') ? encodeText(value) : bindable(value)
  })

/** better-sqlite3 binds no `undefined` or booleans: the rows' optional columns become NULL. */
const bindable = (value: unknown): string | number | bigint | null => {
  if (value === undefined || value === null) return null
  if (typeof value === 'boolean') return value ? 1 : 0
  return value as string | number | bigint
}
