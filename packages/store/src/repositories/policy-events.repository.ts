import type { Executor } from '../executor.js'
import type { NewPolicyEvent, PolicyEventRow } from '../tables/policy-events.table.js'

/** Appends policy events (refusals and decisions) to a run's audit trail. */
export async function insertPolicyEvents(db: Executor, rows: ReadonlyArray<NewPolicyEvent>): Promise<void> {
  if (rows.length === 0) return
  await db
    .insertInto('policy_events')
    .values([...rows])
    .execute()
}

/** A run's audit trail in the order it was written. */
export async function listPolicyEvents(db: Executor, runId: string): Promise<PolicyEventRow[]> {
  return db.selectFrom('policy_events').selectAll().where('run_id', '=', runId).orderBy('id').execute()
}
