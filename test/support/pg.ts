import pg from 'pg'
import { onTestFinished } from 'vitest'
import { admin, createDatabase, databaseUrl, migrateByChain, migratedTemplate } from '../../packages/store/test/support/temp-store.js'

/**
 * Fresh PostgreSQL databases for CLI and process tests, on the test run's server
 * (test/setup/postgres.ts), made by the store tests' own helpers: a `CREATE DATABASE` per test,
 * copied from a template migrated once per test file (or from `template1`, empty, when the test
 * wants the agentvisor processes to migrate it themselves). Each is dropped when its test finishes.
 */

/** A PostgreSQL database open to queries from the test, and its URL for `--db` / `AGENTVISOR_DB`. */
export interface TestDatabase {
  readonly url: string
  /** Runs SQL on the database; rows as `pg` gives them (cast `bigint`s to `int` in the SQL). */
  readonly query: <R extends object = Record<string, unknown>>(sql: string, params?: unknown[]) => Promise<R[]>
}

/**
 * A fresh database for this test, dropped when it finishes. `migrated: false` gives an empty one
 * (no tables): whichever agentvisor process opens it first creates the schema. `byChain`: the
 * schema made by the whole chain of migrations, as a store of the releases before the baselines
 * was (docs/deploy.md, "Migrations"), for a test that walks the chain back.
 */
export const freshDatabase = async (options: { readonly migrated?: boolean; readonly byChain?: boolean } = {}): Promise<TestDatabase> => {
  const byChain = options.byChain ?? false
  const name = await createDatabase(options.migrated === false || byChain ? 'template1' : await migratedTemplate())
  const url = databaseUrl(name)
  if (byChain) await migrateByChain(url)
  const pool = new pg.Pool({ connectionString: url, max: 2 })
  // A connection the drop below terminates must not surface as an uncaught error.
  pool.on('error', () => undefined)
  pool.on('connect', (client) => client.on('error', () => undefined))
  onTestFinished(async () => {
    await pool.end()
    // FORCE: a process a failed test left behind may still be connected.
    await admin()
      .query(`drop database if exists "${name}" with (force)`)
      .catch(() => undefined)
  })
  return {
    url,
    query: async <R extends object>(sql: string, params: unknown[] = []) => (await pool.query(sql, params)).rows as R[]
  }
}

/**
 * The transitions of every run of the database, checked to be numbered 1, 2, 3... per run with
 * no gap and no repeat: what a single driver at a time leaves behind. Returns the count per run.
 */
export const gaplessTransitions = async (db: TestDatabase): Promise<Map<string, number>> => {
  const rows = await db.query<{ run_id: string; seq: number }>('select run_id, seq::int as seq from transitions order by run_id, seq')
  const counts = new Map<string, number>()
  for (const row of rows) {
    const expected = (counts.get(row.run_id) ?? 0) + 1
    if (row.seq !== expected) throw new Error(`run ${row.run_id}: transition seq ${row.seq} where ${expected} was expected`)
    counts.set(row.run_id, expected)
  }
  return counts
}
