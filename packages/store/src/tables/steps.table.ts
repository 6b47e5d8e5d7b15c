import type { ToolCall } from '@agentvisor/core'
import type { Generated, Insertable, Selectable } from 'kysely'

/** One row per model reply that the run acted on (its winning attempt). */
export interface StepsTable {
  run_id: string
  /** 1-based step number; (run_id, step) is the primary key. */
  step: number
  /** Name of the provider whose reply this is. */
  provider: string
  prompt_summary: Generated<string>
  /** The assistant's text; empty when the reply was tool calls only. */
  text: Generated<string>
  /** JSON array of the tool calls the model asked for. */
  tool_calls_json: Generated<string>
  /** JSON array of the tool results, one per call; null until the step's tools ran. */
  results_json: string | null
  /** What the run told the model after a step that failed verification; null when nothing was said. */
  feedback: Generated<string | null>
  tokens_in: Generated<number>
  tokens_out: Generated<number>
  /** ISO-8601. */
  at: string
}

/** One tool call's answer as a step keeps it (and the model reads it back on resume). */
export interface StepToolResult {
  readonly toolCallId: string
  readonly name: string
  readonly ok: boolean
  readonly output: string
  /** Where a tool that is not a built-in comes from (`module`, `mcp:<server>`); absent for built-ins. */
  readonly source?: string | undefined
  /** Its effect class; absent for built-ins, whose classes are fixed (docs/tools.md). */
  readonly effect?: 'read' | 'idempotent' | 'effect' | undefined
  /** The stall warning its output ends with, by rule (docs/task-file.md, "Stalls"). */
  readonly stall?: 'repeat' | 'noProgress' | undefined
}

/** A `steps` row as the database holds it, JSON still text; no read of the store returns it. */
export type StoredStepRow = Selectable<StepsTable>
/** A `steps` row as read: its tool calls and results decoded (steps.columns.ts). */
export type StepRow = Omit<StoredStepRow, 'tool_calls_json' | 'results_json'> & {
  readonly tool_calls: ReadonlyArray<ToolCall>
  /** Null until the step's tools ran. */
  readonly results: ReadonlyArray<StepToolResult> | null
}
/** A `steps` row to insert (text, summary and tool calls default to empty, tokens to 0). */
export type NewStep = Insertable<StepsTable>
