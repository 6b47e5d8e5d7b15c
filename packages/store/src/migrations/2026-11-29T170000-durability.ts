import { type Kysely, PostgresAdapter, sql } from 'kysely'

/**
 * Exactly-once tool effects (a journal of side-effecting tool calls), the lease that lets one
 * driver at a time move a run (with a fencing token), cancel requests from other processes, and
 * the resolution of recovery requests. Frozen: later changes are new migrations. On PostgreSQL,
 * text compares byte-wise as on SQLite (see the initial migration), and the lease's expiry (epoch
 * milliseconds, past what an `integer` holds) and its fencing token are `bigint`.
 */
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter
  const text = postgres ? sql`text collate "C"` : 'text'
  const big = postgres ? 'bigint' : 'integer'
  await db.schema
    .createTable('tool_effects')
    .addColumn('run_id', text, (c) => c.notNull().references('runs.id').onDelete('cascade'))
    .addColumn('step', 'integer', (c) => c.notNull())
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('tool_call_id', text, (c) => c.notNull())
    .addColumn('name', text, (c) => c.notNull())
    .addColumn('arguments', text, (c) => c.notNull())
    .addColumn('status', text, (c) => c.notNull())
    .addColumn('result_json', text)
    .addColumn('started_at', text, (c) => c.notNull())
    .addColumn('completed_at', text)
    .addPrimaryKeyConstraint('tool_effects_pk', ['run_id', 'step', 'position'])
    .execute()

  await db.schema.alterTable('runs').addColumn('lease_owner', text).execute()
  await db.schema.alterTable('runs').addColumn('lease_expires_at', big).execute()
  await db.schema
    .alterTable('runs')
    .addColumn('lease_token', big, (c) => c.notNull().defaultTo(0))
    .execute()
  await db.schema.alterTable('runs').addColumn('cancel_requested_at', text).execute()
  // The tree a run belongs to (its own id for a root): the dispatch ceiling is shared by a tree.
  await db.schema.alterTable('runs').addColumn('root_id', text).execute()
  await db.schema.createIndex('runs_root_id_idx').on('runs').column('root_id').execute()

  await db.schema.alterTable('approvals').addColumn('resolution', text).execute()
  await db.schema.alterTable('approvals').addColumn('account', text).execute()
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('tool_effects').execute()
  await db.schema.dropIndex('runs_root_id_idx').execute()
  for (const column of ['lease_owner', 'lease_expires_at', 'lease_token', 'cancel_requested_at', 'root_id']) {
    await db.schema.alterTable('runs').dropColumn(column).execute()
  }
  for (const column of ['resolution', 'account']) await db.schema.alterTable('approvals').dropColumn(column).execute()
}
