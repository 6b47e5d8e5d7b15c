import type { Executor } from '../executor.js'
import type { NewRememberedRule, RememberedRuleRow } from '../tables/remembered-rules.table.js'

/** Remembers a decision for a workspace; a later decision about the same act and target replaces it. */
export async function rememberRule(db: Executor, row: NewRememberedRule): Promise<void> {
  await db
    .insertInto('remembered_rules')
    .values(row)
    .onConflict((oc) => oc.columns(['workspace', 'act', 'pattern']).doUpdateSet({ decision: row.decision, run_id: row.run_id, created_at: row.created_at }))
    .execute()
}

/** The decisions remembered for a workspace, oldest first (ties by act and target, on every dialect). */
export async function listRememberedRules(db: Executor, workspace: string): Promise<RememberedRuleRow[]> {
  return db.selectFrom('remembered_rules').selectAll().where('workspace', '=', workspace).orderBy('created_at').orderBy('act').orderBy('pattern').execute()
}
