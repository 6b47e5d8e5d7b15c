import type { Pool, QueryResultRow } from 'pg'
import { LeaseLostError } from '../errors.js'
import type { Statement } from './postgres-statement.js'

/** Statements the writer names (prepares per connection) at most; any other shape goes unnamed. The shapes a run's writes take are far fewer. */
const MAX_PREPARED = 200

/**
 * The PostgreSQL writer's queries on the store's `pg` pool. Queries are named, so `pg` prepares
 * each once per connection: the writer's own by their fixed names, a commit's statement by its
 * text (each shape of commit prepared once per connection, a bounded number of them).
 */
export interface NamedQueries {
  /** Runs `text` under `name` (unnamed when undefined) and answers its rows. */
  readonly query: <R extends QueryResultRow>(name: string | undefined, text: string, values: ReadonlyArray<unknown>) => Promise<R[]>
  /** Runs `text` under `name` and answers how many rows it changed. */
  readonly change: (name: string, text: string, values: ReadonlyArray<unknown>) => Promise<number>
  /** A statement's name by its text, while fewer than MAX_PREPARED are named. */
  readonly nameOf: (text: string) => string | undefined
  /** Runs a fenced statement (postgres-statement.ts): its `fenced` 0 is a lost lease. */
  readonly fenced: (runId: string, statement: Statement) => Promise<void>
}

export const namedQueries = (pool: Pool): NamedQueries => {
  const query = async <R extends QueryResultRow>(name: string | undefined, text: string, values: ReadonlyArray<unknown>): Promise<R[]> =>
    (await pool.query<R>(name === undefined ? { text, values: values as unknown[] } : { name, text, values: values as unknown[] })).rows
  const names = new Map<string, string>()
  const nameOf = (text: string): string | undefined => {
    let name = names.get(text)
    if (name === undefined && names.size < MAX_PREPARED) {
      name = `agentvisor_statement_${names.size + 1}`
      names.set(text, name)
    }
    return name
  }
  return {
    query,
    change: async (name, text, values) => (await pool.query({ name, text, values: values as unknown[] })).rowCount ?? 0,
    nameOf,
    fenced: async (runId, statement) => {
      const [row] = await query<{ fenced: number }>(nameOf(statement.text), statement.text, statement.values)
      if (row?.fenced !== 1) throw new LeaseLostError({ runId })
    }
  }
}
