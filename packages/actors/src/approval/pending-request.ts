import type { ApprovalRow } from '@agentvisor/store'

/**
 * A request a run waits on, as `Agentvisor.pending` lists it: `approval` for a tool call the
 * policy answered `ask`, `recovery` for an exec interrupted after it started (docs/policy.md,
 * docs/durability.md).
 */
export interface PendingRequest {
  readonly id: string
  /** `input`: a question the model asked a person (`ask_human`, docs/policy.md, "Questions"). */
  readonly kind: 'approval' | 'recovery' | 'input'
  readonly step: number
  readonly act?: string
  readonly target?: string
  /** The tool call's arguments as the model sent them (the raw text when they are not a JSON object). */
  readonly arguments?: Readonly<Record<string, unknown>> | string
  readonly rule?: string
  readonly layer?: string
  /** The question of an `input` request. */
  readonly question?: string
}

/** The kind a stored request is shown as. */
export const requestKindOf = (row: ApprovalRow): PendingRequest['kind'] => (row.kind === 'recovery' ? 'recovery' : row.kind === 'input' ? 'input' : 'approval')

const argumentsOf = (row: ApprovalRow): PendingRequest['arguments'] => {
  const raw = row.payload.arguments
  try {
    const parsed = JSON.parse(raw) as unknown
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : raw
  } catch {
    return raw
  }
}

export const pendingRequestOf = (row: ApprovalRow): PendingRequest => {
  if (row.kind === 'input') return { id: row.id, kind: 'input', step: row.step, question: row.target }
  const args = argumentsOf(row)
  return {
    id: row.id,
    kind: requestKindOf(row),
    step: row.step,
    act: row.act,
    target: row.target,
    ...(args !== undefined ? { arguments: args } : {}),
    rule: row.rule,
    layer: row.layer
  }
}
