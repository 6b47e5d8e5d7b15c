import { type Kysely, PostgresAdapter, sql } from 'kysely'

/**
 * SQLite only: the per-step tables become `WITHOUT ROWID` tables, stored in the order of their
 * primary key. A rowid table with a composite primary key keeps every row twice (the table and
 * the key's index), so each insert dirtied two pages and each commit wrote both to the WAL; a
 * clustered table writes one. `attempts_pending_idx` goes too: finding a run's pending attempts
 * is a range scan of the clustered key now. PostgreSQL has no such distinction; nothing changes
 * there. Frozen: later changes are new migrations.
 */
const TABLES: ReadonlyArray<readonly [string, string]> = [
  [
    'transitions',
    `("run_id" text not null references "runs" ("id") on delete cascade, "seq" integer not null, "from_state" text not null, "event" text not null, "to_state" text not null, "snapshot_json" text not null, "at" text not null, constraint "transitions_pk" primary key ("run_id", "seq"))`
  ],
  [
    'steps',
    `("run_id" text not null references "runs" ("id") on delete cascade, "step" integer not null, "provider" text not null, "prompt_summary" text default '' not null, "text" text default '' not null, "tool_calls_json" text default '[]' not null, "results_json" text, "feedback" text, "tokens_in" integer default 0 not null, "tokens_out" integer default 0 not null, "at" text not null, constraint "steps_pk" primary key ("run_id", "step"))`
  ],
  [
    'attempts',
    `("run_id" text not null references "runs" ("id") on delete cascade, "step" integer not null, "attempt" integer not null, "provider" text not null, "reason" text not null, "outcome" text default 'pending' not null, "error_kind" text, "http_status" integer, "error_message" text, "latency_ms" integer, "ttft_ms" integer, "tokens_in" integer, "tokens_out" integer, "partial_text" text, "started_at" text not null, "settled_at" text, constraint "attempts_pk" primary key ("run_id", "step", "attempt"), constraint "attempts_reason_check" check (reason in ('initial', 'retry', 'fallover')), constraint "attempts_outcome_check" check (outcome in ('pending', 'ok', 'failed', 'unknown', 'cancelled')))`
  ],
  [
    'tool_effects',
    `("run_id" text not null references "runs" ("id") on delete cascade, "step" integer not null, "position" integer not null, "tool_call_id" text not null, "name" text not null, "arguments" text not null, "status" text not null, "result_json" text, "started_at" text not null, "completed_at" text, constraint "tool_effects_pk" primary key ("run_id", "step", "position"))`
  ]
]

const rebuild = async (db: Kysely<any>, clustered: boolean): Promise<void> => {
  if (db.getExecutor().adapter instanceof PostgresAdapter) return
  if (clustered) await sql`drop index if exists "attempts_pending_idx"`.execute(db)
  for (const [table, body] of TABLES) {
    // SQLite's way to change a table's storage: a new table, the rows copied, the old dropped.
    await sql.raw(`create table "${table}_rebuilt" ${body}${clustered ? ' without rowid' : ''}`).execute(db)
    await sql.raw(`insert into "${table}_rebuilt" select * from "${table}"`).execute(db)
    await sql.raw(`drop table "${table}"`).execute(db)
    await sql.raw(`alter table "${table}_rebuilt" rename to "${table}"`).execute(db)
  }
  if (!clustered) await sql`create index "attempts_pending_idx" on "attempts" ("run_id", "outcome")`.execute(db)
}

export async function up(db: Kysely<any>): Promise<void> {
  await rebuild(db, true)
}

export async function down(db: Kysely<any>): Promise<void> {
  await rebuild(db, false)
}
