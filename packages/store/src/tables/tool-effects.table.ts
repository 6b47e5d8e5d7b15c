import type { Insertable, Selectable } from 'kysely'

/** Where a side-effecting tool call stands in the journal. */
export const EffectStatus = { started: 'started', completed: 'completed' } as const
export type EffectStatus = (typeof EffectStatus)[keyof typeof EffectStatus]

/**
 * The journal of side-effecting tool calls: `started` is durable before the call runs,
 * `completed` (with its result) right after. A resume replays completed calls and never runs
 * them again.
 */
export interface ToolEffectsTable {
  run_id: string
  step: number
  /** The call's index among the step's tool calls. */
  position: number
  tool_call_id: string
  /** The tool performed (after any approved edit). */
  name: string
  /** The raw arguments performed. */
  arguments: string
  status: EffectStatus
  /** The tool result record as JSON, once completed; read back as `ToolEffectRow.result`. */
  result_json: string | null
  started_at: string
  completed_at: string | null
}

/** A journalled call's result, replayed on resume instead of running the call again. */
export interface ToolEffectResult {
  readonly ok: boolean
  readonly output: string
  readonly refusal?: { readonly rule: string; readonly layer: string } | undefined
}

/** A `tool_effects` row as the database holds it, JSON still text; no read of the store returns it. */
export type StoredToolEffectRow = Selectable<ToolEffectsTable>
/** A `tool_effects` row as read: its result decoded (tool-effects.columns.ts). */
export type ToolEffectRow = Omit<StoredToolEffectRow, 'result_json'> & { readonly result: ToolEffectResult | null }
export type NewToolEffect = Insertable<ToolEffectsTable>
