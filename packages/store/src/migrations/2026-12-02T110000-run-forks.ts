import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema as it was on 2026-12-02. Later changes are new migrations.
//
// `runs.forked_from_run`, `runs.forked_from_seq`: a run forked from another's past state
// (`agentvisor fork RUN --at SEQ`, the inspector's Fork) names that run and seq; NULL for any
// other run. No foreign key: the original may be deleted, the fork's record of it stays.

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

/** Whether the columns are there already: a store that lost only the record of this migration (see 2026-12-01T160000). */
const hasForkColumns = async (db: Kysely<any>): Promise<boolean> => {
  const found = isPostgres(db)
    ? await sql<{
        n: number
      }>`select count(*)::int as n from information_schema.columns where table_name = 'runs' and column_name = 'forked_from_run' and table_schema = current_schema()`.execute(
        db
      )
    : await sql<{ n: number }>`select count(*) as n from pragma_table_info('runs') where name = 'forked_from_run'`.execute(db)
  return Number(found.rows[0]?.n) > 0
}

export async function up(db: Kysely<any>): Promise<void> {
  if (await hasForkColumns(db)) return
  // On PostgreSQL every text column compares byte-wise, as SQLite's do (2026-11-29T120000).
  await sql.raw(`alter table runs add column forked_from_run text${isPostgres(db) ? ' collate "C"' : ''}`).execute(db)
  await sql`alter table runs add column forked_from_seq integer`.execute(db)
  await sql`create index runs_forked_from on runs (forked_from_run)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index runs_forked_from`.execute(db)
  await sql`alter table runs drop column forked_from_seq`.execute(db)
  await sql`alter table runs drop column forked_from_run`.execute(db)
}
