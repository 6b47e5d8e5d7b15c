import type { Executor } from '../executor.js'
import { decodeApprovalRow } from '../tables/approvals.columns.js'
import type { ApprovalRow, ApprovalStatus, DecisionSource, NewApproval } from '../tables/approvals.table.js'

/** Persists an approval request; a request for the same tool call of the same step is kept once. */
export async function insertApproval(db: Executor, row: NewApproval): Promise<void> {
  await db
    .insertInto('approvals')
    .values(row)
    .onConflict((oc) => oc.columns(['run_id', 'step', 'tool_call_id']).doNothing())
    .execute()
}

/**
 * A run's approval requests by step, then by their call's order in the step (optionally one step
 * only). The id breaks any remaining tie, so the order is the same on every dialect. Rejects with
 * `StoreError` when a payload does not decode.
 */
export async function listApprovals(db: Executor, runId: string, step?: number, fromStep = 1): Promise<ApprovalRow[]> {
  let query = db.selectFrom('approvals').selectAll().where('run_id', '=', runId)
  if (step !== undefined) query = query.where('step', '=', step)
  if (fromStep > 1) query = query.where('step', '>=', fromStep)
  return (await query.orderBy('step').orderBy('position').orderBy('created_at').orderBy('id').execute()).map(decodeApprovalRow)
}

/** One request by id. */
export async function getApproval(db: Executor, id: string): Promise<ApprovalRow | undefined> {
  const row = await db.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirst()
  return row === undefined ? undefined : decodeApprovalRow(row)
}

export interface ApprovalDecision {
  readonly status: Exclude<ApprovalStatus, 'pending'>
  readonly source: DecisionSource
  readonly remember: boolean
  readonly editedPayloadJson: string | null
  readonly decidedAt: string
  /** For a recovery request: `retry`, `completed` or `abort`. */
  readonly resolution?: string | null
  /** For `completed`: what the operator says happened. */
  readonly account?: string | null
}

/**
 * Decides a pending request. Returns false when it was already decided: a decision is final,
 * so two approvers racing (CLI and NATS, say) cannot both win.
 */
export async function decideApproval(db: Executor, id: string, decision: ApprovalDecision): Promise<boolean> {
  const result = await db
    .updateTable('approvals')
    .set({
      status: decision.status,
      source: decision.source,
      remember: decision.remember ? 1 : 0,
      edited_payload_json: decision.editedPayloadJson,
      decided_at: decision.decidedAt,
      resolution: decision.resolution ?? null,
      account: decision.account ?? null
    })
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .executeTakeFirst()
  return result.numUpdatedRows > 0n
}

/**
 * Closes the open requests of a run that ended without them (cancelled, timed out, failed): each
 * becomes `denied` with resolution `closed`, so no list of pending requests shows a stale one
 * (docs/policy.md). Returns how many were closed.
 */
export async function closeOpenRequests(db: Executor, runId: string, at: string): Promise<number> {
  const result = await db
    .updateTable('approvals')
    .set({ status: 'denied', resolution: 'closed', decided_at: at })
    .where('run_id', '=', runId)
    .where('status', '=', 'pending')
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
}
