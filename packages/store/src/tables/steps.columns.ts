// The JSON columns of `steps`, each read through one Schema.
import * as Schema from 'effect/Schema'
import { decodeJsonAt, jsonColumn } from '../json-column.js'
import type { StepRow, StoredStepRow } from './steps.table.js'

/** `steps.tool_calls_json`: the tool calls the model asked for, arguments as their raw text. */
export const ToolCallsJson = Schema.parseJson(Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String, arguments: Schema.String })))

/**
 * `steps.results_json`: one result per tool call, in the calls' order; a tool that is not a
 * built-in's result names its source and effect class (docs/tools.md, "In the trace").
 */
export const ResultsJson = Schema.parseJson(
  Schema.Array(
    Schema.Struct({
      toolCallId: Schema.String,
      name: Schema.String,
      ok: Schema.Boolean,
      output: Schema.String,
      source: Schema.optional(Schema.String),
      effect: Schema.optional(Schema.Literal('read', 'idempotent', 'effect')),
      stall: Schema.optional(Schema.Literal('repeat', 'noProgress'))
    })
  )
)

const decodeToolCalls = jsonColumn(ToolCallsJson)
const decodeResults = jsonColumn(ResultsJson)

/** A `steps` row with its JSON decoded; throws `StoreError` naming the run, column and step. */
export const decodeStepRow = (stored: StoredStepRow): StepRow => {
  const { tool_calls_json, results_json, ...row } = stored
  const at = (column: string) => ({ runId: row.run_id, column, row: `step ${row.step}` })
  return {
    ...row,
    tool_calls: decodeJsonAt(decodeToolCalls, tool_calls_json, at('steps.tool_calls_json')),
    results: results_json === null ? null : decodeJsonAt(decodeResults, results_json, at('steps.results_json'))
  }
}
