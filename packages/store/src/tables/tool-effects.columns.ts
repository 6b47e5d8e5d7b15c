// The JSON column of `tool_effects`, read through its Schema. `arguments` is the model's raw
// text, which need not be JSON at all: it stays text.
import * as Schema from 'effect/Schema'
import { decodeJsonAt, jsonColumn } from '../json-column.js'
import type { StoredToolEffectRow, ToolEffectRow } from './tool-effects.table.js'

/** `tool_effects.result_json`: a completed call's result, replayed on resume. */
export const ToolEffectResultJson = Schema.parseJson(
  Schema.Struct({
    ok: Schema.Boolean,
    output: Schema.String,
    refusal: Schema.optional(Schema.Struct({ rule: Schema.String, layer: Schema.String }))
  })
)

const decodeResult = jsonColumn(ToolEffectResultJson)

/** A `tool_effects` row with its result decoded; throws `StoreError` naming the run, column and call. */
export const decodeToolEffectRow = (stored: StoredToolEffectRow): ToolEffectRow => {
  const { result_json, ...row } = stored
  return {
    ...row,
    result:
      result_json === null
        ? null
        : decodeJsonAt(decodeResult, result_json, { runId: row.run_id, column: 'tool_effects.result_json', row: `step ${row.step}, call ${row.position}` })
  }
}
