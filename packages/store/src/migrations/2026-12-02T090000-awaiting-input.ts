import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema as it was on 2026-12-02. Later changes are new migrations.
//
// A run's status may be `awaiting_input`: paused on a question its model asked a person with
// `ask_human` (docs/policy.md, "Questions"). The CHECK on `runs.status` takes the new value:
//
// - PostgreSQL: the domain's constraint (2026-12-01T170000) is dropped and added again with it.
// - SQLite: a table's CHECK cannot be altered, and rebuilding `runs` would mean rebuilding every
//   view and trigger of `run_log` that names it. SQLite documents a simpler procedure for a change
//   that every stored row already satisfies (removing or loosening a CHECK): the table's SQL text
//   in `sqlite_schema` is edited under `writable_schema`, and the schema version bumped so that
//   every connection reads it again (https://sqlite.org/lang_altertable.html, "otheralter"). The
//   migrator runs with better-sqlite3's defensive mode off for this (open-store.ts); the edit is
//   part of the migrations' one transaction.

const OLD = `'cancelled', 'timed_out')`
const NEW = `'cancelled', 'timed_out', 'awaiting_input')`
const VALUES = `'running', 'awaiting_approval', 'awaiting_input', 'succeeded', 'step_cap', 'failed', 'cancelled', 'timed_out'`
const OLD_VALUES = `'running', 'awaiting_approval', 'succeeded', 'step_cap', 'failed', 'cancelled', 'timed_out'`

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) {
    await sql.raw(`alter domain agentvisor_run_status drop constraint runs_status_check`).execute(db)
    await sql.raw(`alter domain agentvisor_run_status add constraint runs_status_check check (value in (${VALUES}))`).execute(db)
    return
  }
  const table = await sql<{ sql: string }>`select sql from sqlite_schema where type = 'table' and name = 'runs'`.execute(db)
  const text = table.rows[0]?.sql ?? ''
  // A store that lost only the record of this migration has the value already (see 2026-12-01T160000).
  if (text.includes(`'awaiting_input'`)) return
  if (!text.includes(OLD)) throw new Error(`the runs table's status CHECK is not the one this migration knows: ${text}`)
  await editRunsTable(db, OLD, NEW)
}

/** Replaces `from` by `to` in the `runs` table's SQL text, the documented way (see above). */
const editRunsTable = async (db: Kysely<any>, from: string, to: string): Promise<void> => {
  const version = await sql<{ schema_version: number }>`pragma schema_version`.execute(db)
  await sql`pragma writable_schema = on`.execute(db)
  try {
    await sql`update sqlite_schema set sql = replace(sql, ${from}, ${to}) where type = 'table' and name = 'runs'`.execute(db)
  } catch (error) {
    throw new Error(`cannot loosen the runs table's status CHECK: this migration needs SQLite's defensive mode off, as openStore runs it (${String(error)})`)
  }
  await sql.raw(`pragma schema_version = ${Number(version.rows[0]?.schema_version) + 1}`).execute(db)
  await sql`pragma writable_schema = off`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) {
    await sql.raw(`alter domain agentvisor_run_status drop constraint runs_status_check`).execute(db)
    await sql.raw(`alter domain agentvisor_run_status add constraint runs_status_check check (value in (${OLD_VALUES}))`).execute(db)
    return
  }
  await editRunsTable(db, NEW, OLD)
}
