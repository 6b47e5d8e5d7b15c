import type { Generated, Insertable, Selectable } from 'kysely'

/** Where an approval request stands. */
export const ApprovalStatus = { pending: 'pending', approved: 'approved', denied: 'denied' } as const
export type ApprovalStatus = (typeof ApprovalStatus)[keyof typeof ApprovalStatus]

/** Who decided a request or a policy event: the audit's `source` (docs/policy.md, "Audit"). */
export const DecisionSource = {
  policy: 'policy',
  prompt: 'prompt',
  cli: 'cli',
  remembered: 'remembered',
  auto: 'auto',
  nats: 'nats',
  api: 'api',
  /** A decision or answer given on the web inspector's page (docs/inspector.md). */
  inspector: 'inspector'
} as const
export type DecisionSource = (typeof DecisionSource)[keyof typeof DecisionSource]

/**
 * A tool call that policy answered `ask`: persisted with the exact payload to replay, so the
 * decision may come from another process while the run is paused, and resume performs it.
 */
export interface ApprovalsTable {
  id: string
  run_id: string
  step: number
  tool_call_id: string
  /** The call's index among the step's tool calls: requests are listed and asked in that order. */
  position: Generated<number>
  /** `policy` for an ask; `recovery` for an exec interrupted after it started. */
  kind: Generated<string>
  act: string
  target: string
  /** The tool call as the model asked for it: `{name, arguments}`. */
  payload_json: string
  rule: string
  layer: string
  status: Generated<ApprovalStatus>
  source: DecisionSource | null
  remember: Generated<number>
  /** The tool call performed instead, when approved with edits. */
  edited_payload_json: string | null
  created_at: string
  decided_at: string | null
  /** For a recovery request: `retry`, `completed` or `abort`. */
  resolution: Generated<string | null>
  /** For `completed`: the operator's account of what happened, told to the model. */
  account: Generated<string | null>
}

/** A tool call as an approval keeps it: the tool and its raw arguments. */
export interface ApprovalPayload {
  readonly name: string
  readonly arguments: string
}

/** An `approvals` row as the database holds it, JSON still text; no read of the store returns it. */
export type StoredApprovalRow = Selectable<ApprovalsTable>
/** An `approvals` row as read: its payloads decoded (approvals.columns.ts). */
export type ApprovalRow = Omit<StoredApprovalRow, 'payload_json' | 'edited_payload_json'> & {
  readonly payload: ApprovalPayload
  readonly edited_payload: ApprovalPayload | null
}
export type NewApproval = Insertable<ApprovalsTable>
