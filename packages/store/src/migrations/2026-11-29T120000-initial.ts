import { PostgresAdapter, sql, type Kysely } from 'kysely'

// Frozen: this file is the schema as it was on 2026-11-29. It takes `Kysely<any>` and imports no
// app types, so later changes to the table types can never rewrite history. Change the schema
// with a new timestamped migration instead.
//
// One schema, two dialects: on SQLite the DDL is exactly what it always was (a test compares it
// with a snapshot). On PostgreSQL, text compares byte-wise (`collate "C"`, as SQLite's BINARY
// does), so ids and ISO timestamps sort the same on both whatever the database's locale; and
// columns of milliseconds are `bigint`, past the 24.8 days an `integer` holds.

/** Creates runs, transitions, steps and attempts. */
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter
  const text = postgres ? sql`text collate "C"` : 'text'
  const millis = postgres ? 'bigint' : 'integer'
  await db.schema
    .createTable('runs')
    .addColumn('id', text, (c) => c.primaryKey())
    .addColumn('parent_id', text, (c) => c.references('runs.id'))
    .addColumn('status', text, (c) => c.notNull())
    .addColumn('goal', text, (c) => c.notNull())
    .addColumn('contract_json', text, (c) => c.notNull())
    .addColumn('state', text, (c) => c.notNull())
    .addColumn('steps', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('error_json', text)
    .addColumn('created_at', text, (c) => c.notNull())
    .addColumn('updated_at', text, (c) => c.notNull())
    .addColumn('ended_at', text)
    // The status strings are public (docs/cli.md); a typo must fail at the write, not in a report.
    .addCheckConstraint('runs_status_check', sql`status in ('running', 'awaiting_approval', 'succeeded', 'step_cap', 'failed', 'cancelled', 'timed_out')`)
    .execute()
  // `runs --status S` filters and orders by creation; the composite serves both.
  await db.schema.createIndex('runs_status_idx').on('runs').columns(['status', 'created_at']).execute()
  await db.schema.createIndex('runs_parent_id_idx').on('runs').column('parent_id').execute()
  await db.schema.createIndex('runs_created_at_idx').on('runs').columns(['created_at', 'id']).execute()

  await db.schema
    .createTable('transitions')
    .addColumn('run_id', text, (c) => c.notNull().references('runs.id').onDelete('cascade'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('from_state', text, (c) => c.notNull())
    .addColumn('event', text, (c) => c.notNull())
    .addColumn('to_state', text, (c) => c.notNull())
    .addColumn('snapshot_json', text, (c) => c.notNull())
    .addColumn('at', text, (c) => c.notNull())
    .addPrimaryKeyConstraint('transitions_pk', ['run_id', 'seq'])
    .execute()

  await db.schema
    .createTable('steps')
    .addColumn('run_id', text, (c) => c.notNull().references('runs.id').onDelete('cascade'))
    .addColumn('step', 'integer', (c) => c.notNull())
    .addColumn('provider', text, (c) => c.notNull())
    .addColumn('prompt_summary', text, (c) => c.notNull().defaultTo(''))
    .addColumn('text', text, (c) => c.notNull().defaultTo(''))
    .addColumn('tool_calls_json', text, (c) => c.notNull().defaultTo('[]'))
    .addColumn('results_json', text)
    .addColumn('feedback', text)
    .addColumn('tokens_in', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('tokens_out', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('at', text, (c) => c.notNull())
    .addPrimaryKeyConstraint('steps_pk', ['run_id', 'step'])
    .execute()

  // No foreign key to `steps`: the receipt is written before the dispatch, the step row only
  // once a reply won.
  await db.schema
    .createTable('attempts')
    .addColumn('run_id', text, (c) => c.notNull().references('runs.id').onDelete('cascade'))
    .addColumn('step', 'integer', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('provider', text, (c) => c.notNull())
    .addColumn('reason', text, (c) => c.notNull())
    .addColumn('outcome', text, (c) => c.notNull().defaultTo('pending'))
    .addColumn('error_kind', text)
    .addColumn('http_status', 'integer')
    .addColumn('error_message', text)
    .addColumn('latency_ms', millis)
    .addColumn('ttft_ms', millis)
    .addColumn('tokens_in', 'integer')
    .addColumn('tokens_out', 'integer')
    .addColumn('partial_text', text)
    .addColumn('started_at', text, (c) => c.notNull())
    .addColumn('settled_at', text)
    .addPrimaryKeyConstraint('attempts_pk', ['run_id', 'step', 'attempt'])
    .addCheckConstraint('attempts_reason_check', sql`reason in ('initial', 'retry', 'fallover')`)
    .addCheckConstraint('attempts_outcome_check', sql`outcome in ('pending', 'ok', 'failed', 'unknown', 'cancelled')`)
    .execute()
  // Resume looks for a run's still-pending receipts.
  await db.schema.createIndex('attempts_pending_idx').on('attempts').columns(['run_id', 'outcome']).execute()
}

/** Drops everything `up` created, children first. */
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('attempts').execute()
  await db.schema.dropTable('steps').execute()
  await db.schema.dropTable('transitions').execute()
  await db.schema.dropTable('runs').execute()
}
