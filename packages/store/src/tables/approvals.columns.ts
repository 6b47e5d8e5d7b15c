// The JSON columns of `approvals`, each read through one Schema.
import * as Schema from 'effect/Schema'
import { decodeJsonAt, jsonColumn } from '../json-column.js'
import type { ApprovalRow, StoredApprovalRow } from './approvals.table.js'

const Payload = Schema.Struct({ name: Schema.String, arguments: Schema.String })

/** `approvals.payload_json`: the tool call as the model asked for it. */
export const PayloadJson = Schema.parseJson(Payload)
/** `approvals.edited_payload_json`: the tool call performed instead (approved with edits). */
export const EditedPayloadJson = Schema.parseJson(Payload)

const decodePayload = jsonColumn(PayloadJson)
const decodeEditedPayload = jsonColumn(EditedPayloadJson)

/** An `approvals` row with its payloads decoded; throws `StoreError` naming the run, column and request. */
export const decodeApprovalRow = (stored: StoredApprovalRow): ApprovalRow => {
  const { payload_json, edited_payload_json, ...row } = stored
  const at = (column: string) => ({ runId: row.run_id, column, row: `step ${row.step}, request ${row.id}` })
  return {
    ...row,
    payload: decodeJsonAt(decodePayload, payload_json, at('approvals.payload_json')),
    edited_payload: edited_payload_json === null ? null : decodeJsonAt(decodeEditedPayload, edited_payload_json, at('approvals.edited_payload_json'))
  }
}
