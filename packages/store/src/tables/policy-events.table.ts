import type { Generated, Insertable, Selectable } from 'kysely'
import type { DecisionSource } from './approvals.table.js'

/** The audit trail of policy: every refusal and every approval decision, never file contents. */
export interface PolicyEventsTable {
  id: Generated<number>
  run_id: string
  step: number
  kind: 'refusal' | 'decision'
  act: string
  target: string
  rule: string
  layer: string
  /** `deny` for a refusal; `approved` or `denied` for a decision. */
  decision: string
  source: DecisionSource
  request_id: string | null
  /** What was performed when it differs from what was requested (approve with edits). */
  performed_target: string | null
  at: string
}

export type PolicyEventRow = Selectable<PolicyEventsTable>
export type NewPolicyEvent = Insertable<PolicyEventsTable>
