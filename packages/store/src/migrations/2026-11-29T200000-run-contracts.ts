import { type Kysely, PostgresAdapter, sql } from 'kysely'

/**
 * Moves each run's contract out of its `runs` row into `run_contracts`. The run row is updated
 * at every transition; with the contract inside it (a long goal, inline scripted steps, a big
 * policy) every update rewrote the whole contract, often across overflow pages. The contract
 * never changes once written, so it lives apart and the hot row stays a few hundred bytes.
 * Frozen: later changes are new migrations. On PostgreSQL, text compares byte-wise as on SQLite
 * (see the initial migration).
 */
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter
  const text = postgres ? sql`text collate "C"` : 'text'
  await db.schema
    .createTable('run_contracts')
    .addColumn('run_id', text, (c) => c.primaryKey().references('runs.id').onDelete('cascade'))
    .addColumn('contract_json', text, (c) => c.notNull())
    .execute()
  await db
    .insertInto('run_contracts')
    .columns(['run_id', 'contract_json'])
    .expression(db.selectFrom('runs').select(['id', 'contract_json']))
    .execute()
  await db.schema.alterTable('runs').dropColumn('contract_json').execute()
}

export async function down(db: Kysely<any>): Promise<void> {
  const text = db.getExecutor().adapter instanceof PostgresAdapter ? sql`text collate "C"` : 'text'
  await db.schema
    .alterTable('runs')
    .addColumn('contract_json', text, (c) => c.notNull().defaultTo('{}'))
    .execute()
  await db
    .updateTable('runs')
    .set((eb) => ({ contract_json: eb.selectFrom('run_contracts').select('contract_json').whereRef('run_contracts.run_id', '=', 'runs.id') }))
    .execute()
  await db.schema.dropTable('run_contracts').execute()
}
