import type { Effect } from 'effect/Effect'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'
import { decodeApprovalRow } from '../tables/approvals.columns.js'
import type { ApprovalRow, ApprovalStatus, DecisionSource, NewApproval } from '../tables/approvals.table.js'
import type { NewPolicyEvent } from '../tables/policy-events.table.js'
import type { NewRememberedRule } from '../tables/remembered-rules.table.js'
import { insertPolicyEventsAsync } from './policy-events.repository.js'
import { rememberRuleAsync } from './remembered-rules.repository.js'

/** `insertApproval` as a promise, for a transaction of the Kysely writer (run-writer.ts). */
export async function insertApprovalAsync(db: Executor, row: NewApproval): Promise<void> {
  await db
    .insertInto('approvals')
    .values(row)
    .onConflict((oc) => oc.columns(['run_id', 'step', 'tool_call_id']).doNothing())
    .execute()
}

/** `listApprovals` as a promise, for the Kysely writer (run-writer.ts). */
export async function listApprovalsAsync(db: Executor, runId: string, step?: number, fromStep = 1): Promise<ApprovalRow[]> {
  let query = db.selectFrom('approvals').selectAll().where('run_id', '=', runId)
  if (step !== undefined) query = query.where('step', '=', step)
  if (fromStep > 1) query = query.where('step', '>=', fromStep)
  return (await query.orderBy('step').orderBy('position').orderBy('created_at').orderBy('id').execute()).map(decodeApprovalRow)
}

/** Persists an approval request; a request for the same tool call of the same step is kept once. */
export const insertApproval = (db: Executor, row: NewApproval): Effect<void, StoreError> =>
  storeCall(
    () => `record request ${row.id} of run ${row.run_id}`,
    () => insertApprovalAsync(db, row)
  )

/**
 * A run's approval requests by step, then by their call's order in the step (optionally one step
 * only). The id breaks any remaining tie, so the order is the same on every dialect. Fails with
 * `StoreError` when a payload does not decode.
 */
export const listApprovals = (db: Executor, runId: string, step?: number, fromStep = 1): Effect<ApprovalRow[], StoreError> =>
  storeCall(
    () => `load the requests of run ${runId}`,
    () => listApprovalsAsync(db, runId, step, fromStep)
  )

/** One request by id. */
export const getApproval = (db: Executor, id: string): Effect<ApprovalRow | undefined, StoreError> =>
  storeCall(
    () => `load request ${id}`,
    async () => {
      const row = await db.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirst()
      return row === undefined ? undefined : decodeApprovalRow(row)
    }
  )

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

/** `decideApproval` as a promise, for a transaction (`recordDecision`). */
async function decideApprovalAsync(db: Executor, id: string, decision: ApprovalDecision): Promise<boolean> {
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
 * Decides a pending request. Answers false when it was already decided: a decision is final,
 * so two approvers racing (CLI and NATS, say) cannot both win.
 */
export const decideApproval = (db: Executor, id: string, decision: ApprovalDecision): Effect<boolean, StoreError> =>
  storeCall(
    () => `record the decision on request ${id}`,
    () => decideApprovalAsync(db, id, decision)
  )

/**
 * Decides a pending request with its audit event, and the decision remembered for the workspace
 * when given, in one transaction. Answers false, writing nothing, when the request was decided
 * already: whoever decides first wins.
 */
export const recordDecision = (
  db: Executor,
  id: string,
  decision: ApprovalDecision,
  event: NewPolicyEvent,
  remembered?: NewRememberedRule
): Effect<boolean, StoreError> =>
  storeCall(
    () => `record the decision on request ${id}`,
    () => {
      const decide = async (trx: Executor): Promise<boolean> => {
        if (!(await decideApprovalAsync(trx, id, decision))) return false
        await insertPolicyEventsAsync(trx, [event])
        if (remembered !== undefined) await rememberRuleAsync(trx, remembered)
        return true
      }
      return db.isTransaction ? decide(db) : db.transaction().execute(decide)
    }
  )

/**
 * Records a person's answer to a question (`ask_human`, docs/policy.md, "Questions"): the request
 * becomes `approved` with resolution `answered` and the answer as its account. Answers false,
 * changing nothing, when it is no longer pending: the first answer wins.
 */
export const answerApproval = (db: Executor, id: string, text: string, source: DecisionSource, at: string): Effect<boolean, StoreError> =>
  storeCall(
    () => `answer request ${id}`,
    // A pending request is neither remembered nor edited, so those columns keep what they hold.
    () =>
      decideApprovalAsync(db, id, {
        status: 'approved',
        source,
        remember: false,
        editedPayloadJson: null,
        decidedAt: at,
        resolution: 'answered',
        account: text
      })
  )

/**
 * Closes the open requests of a run that ended without them (cancelled, timed out, failed): each
 * becomes `denied` with resolution `closed`, so no list of pending requests shows a stale one
 * (docs/policy.md). Answers how many were closed.
 */
export const closeOpenRequests = (db: Executor, runId: string, at: string): Effect<number, StoreError> =>
  storeCall(
    () => `close the open requests of run ${runId}`,
    async () => {
      const result = await db
        .updateTable('approvals')
        .set({ status: 'denied', resolution: 'closed', decided_at: at })
        .where('run_id', '=', runId)
        .where('status', '=', 'pending')
        .executeTakeFirst()
      return Number(result.numUpdatedRows)
    }
  )
