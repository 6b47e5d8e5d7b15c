import { type Kysely, PostgresAdapter, sql } from 'kysely'

/**
 * Approval requests, the policy audit trail, and remembered decisions.
 * Frozen: a later change to these tables is a new migration. On PostgreSQL, text compares
 * byte-wise as on SQLite (see the initial migration) and the audit's key is an identity column.
 */
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter
  const text = postgres ? sql`text collate "C"` : 'text'
  await db.schema
    .createTable('approvals')
    .addColumn('id', text, (c) => c.primaryKey())
    .addColumn('run_id', text, (c) => c.notNull().references('runs.id').onDelete('cascade'))
    .addColumn('step', 'integer', (c) => c.notNull())
    .addColumn('tool_call_id', text, (c) => c.notNull())
    .addColumn('position', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('kind', text, (c) => c.notNull().defaultTo('policy'))
    .addColumn('act', text, (c) => c.notNull())
    .addColumn('target', text, (c) => c.notNull())
    .addColumn('payload_json', text, (c) => c.notNull())
    .addColumn('rule', text, (c) => c.notNull())
    .addColumn('layer', text, (c) => c.notNull())
    .addColumn('status', text, (c) => c.notNull().defaultTo('pending'))
    .addColumn('source', text)
    .addColumn('remember', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('edited_payload_json', text)
    .addColumn('created_at', text, (c) => c.notNull())
    .addColumn('decided_at', text)
    .addCheckConstraint('approvals_status_check', sql`status in ('pending', 'approved', 'denied')`)
    .addUniqueConstraint('approvals_call_unique', ['run_id', 'step', 'tool_call_id'])
    .execute()
  await db.schema.createIndex('approvals_run_status_idx').on('approvals').columns(['run_id', 'status']).execute()

  await db.schema
    .createTable('policy_events')
    // SQLite's AUTOINCREMENT never reuses an id; PostgreSQL's identity (a sequence) neither. It is
    // `bigint` there: the audit of every run of a shared store may outgrow an `integer`.
    .addColumn('id', postgres ? 'bigint' : 'integer', (c) => (postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement()))
    .addColumn('run_id', text, (c) => c.notNull().references('runs.id').onDelete('cascade'))
    .addColumn('step', 'integer', (c) => c.notNull())
    .addColumn('kind', text, (c) => c.notNull())
    .addColumn('act', text, (c) => c.notNull())
    .addColumn('target', text, (c) => c.notNull())
    .addColumn('rule', text, (c) => c.notNull())
    .addColumn('layer', text, (c) => c.notNull())
    .addColumn('decision', text, (c) => c.notNull())
    .addColumn('source', text, (c) => c.notNull())
    .addColumn('request_id', text)
    .addColumn('performed_target', text)
    .addColumn('at', text, (c) => c.notNull())
    .addCheckConstraint('policy_events_kind_check', sql`kind in ('refusal', 'decision')`)
    .execute()
  await db.schema.createIndex('policy_events_run_idx').on('policy_events').columns(['run_id', 'id']).execute()

  await db.schema
    .createTable('remembered_rules')
    .addColumn('workspace', text, (c) => c.notNull())
    .addColumn('act', text, (c) => c.notNull())
    .addColumn('pattern', text, (c) => c.notNull())
    .addColumn('decision', text, (c) => c.notNull())
    .addColumn('run_id', text)
    .addColumn('created_at', text, (c) => c.notNull())
    .addPrimaryKeyConstraint('remembered_rules_pk', ['workspace', 'act', 'pattern'])
    .addCheckConstraint('remembered_rules_decision_check', sql`decision in ('allow', 'deny')`)
    .execute()
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('remembered_rules').execute()
  await db.schema.dropTable('policy_events').execute()
  await db.schema.dropTable('approvals').execute()
}
