import type { Effect } from 'effect/Effect'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'
import type { NewRememberedRule, RememberedRuleRow } from '../tables/remembered-rules.table.js'

/** `rememberRule` as a promise, for a transaction (`recordDecision`). */
export async function rememberRuleAsync(db: Executor, row: NewRememberedRule): Promise<void> {
  await db
    .insertInto('remembered_rules')
    .values(row)
    .onConflict((oc) => oc.columns(['workspace', 'act', 'pattern']).doUpdateSet({ decision: row.decision, run_id: row.run_id, created_at: row.created_at }))
    .execute()
}

/** Remembers a decision for a workspace; a later decision about the same act and target replaces it. */
export const rememberRule = (db: Executor, row: NewRememberedRule): Effect<void, StoreError> =>
  storeCall(
    () => `remember a decision for workspace ${row.workspace}`,
    () => rememberRuleAsync(db, row)
  )

/** `listRememberedRules` as a promise, for the Kysely writer (run-writer.ts). */
export async function listRememberedRulesAsync(db: Executor, workspace: string): Promise<RememberedRuleRow[]> {
  return db.selectFrom('remembered_rules').selectAll().where('workspace', '=', workspace).orderBy('created_at').orderBy('act').orderBy('pattern').execute()
}

/** The decisions remembered for a workspace, oldest first (ties by act and target, on every dialect). */
export const listRememberedRules = (db: Executor, workspace: string): Effect<RememberedRuleRow[], StoreError> =>
  storeCall('load remembered decisions', () => listRememberedRulesAsync(db, workspace))
