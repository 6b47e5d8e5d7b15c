import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema as it was on 2026-12-02. Later changes are new migrations.
//
// `runs.usage_json`: what a run's model calls cost, `{"inputTokens", "outputTokens", "costUsd"?}`
// (docs/task-file.md, "Usage and budgets"), written when the driver lets the run go (it ends or
// pauses) in the statement that releases the lease, so it costs no statement of its own and
// nothing at each step. `runs --json` reads it from the row; NULL for a run that is running or was
// let go before this migration, whose usage is then summed from its receipts.

// On PostgreSQL every text column compares byte-wise, as SQLite's do (2026-11-29T120000).
const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

/** Whether the column is there already: a store that lost only the record of this migration (see 2026-12-01T160000). */
const hasUsageColumn = async (db: Kysely<any>): Promise<boolean> => {
  const found = isPostgres(db)
    ? await sql<{
        n: number
      }>`select count(*)::int as n from information_schema.columns where table_name = 'runs' and column_name = 'usage_json' and table_schema = current_schema()`.execute(
        db
      )
    : await sql<{ n: number }>`select count(*) as n from pragma_table_info('runs') where name = 'usage_json'`.execute(db)
  return Number(found.rows[0]?.n) > 0
}

export async function up(db: Kysely<any>): Promise<void> {
  if (await hasUsageColumn(db)) return
  await sql.raw(`alter table runs add column usage_json text${isPostgres(db) ? ' collate "C"' : ''}`).execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table runs drop column usage_json`.execute(db)
}
