import type { Effect } from 'effect/Effect'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'
import type { NewPolicyEvent, PolicyEventRow } from '../tables/policy-events.table.js'

/** `insertPolicyEvents` as a promise, for a transaction (run-writer.ts, `recordDecision`). */
export async function insertPolicyEventsAsync(db: Executor, rows: ReadonlyArray<NewPolicyEvent>): Promise<void> {
  if (rows.length === 0) return
  await db
    .insertInto('policy_events')
    .values([...rows])
    .execute()
}

/** Appends policy events (refusals and decisions) to a run's audit trail. */
export const insertPolicyEvents = (db: Executor, rows: ReadonlyArray<NewPolicyEvent>): Effect<void, StoreError> =>
  storeCall(
    () => `record the policy events of run ${rows[0]?.run_id}`,
    () => insertPolicyEventsAsync(db, rows)
  )

/** A run's audit trail in the order it was written. */
export const listPolicyEvents = (db: Executor, runId: string): Effect<PolicyEventRow[], StoreError> =>
  storeCall(
    () => `load the policy events of run ${runId}`,
    () => db.selectFrom('policy_events').selectAll().where('run_id', '=', runId).orderBy('id').execute()
  )
