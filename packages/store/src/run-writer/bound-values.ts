import type { AttemptSettlement, NewAttempt } from '../tables/attempts.table.js'
import type { NewStep } from '../tables/steps.table.js'
import { encodeText } from '../text-codec.js'

/**
 * The values a run writer binds for the rows every step writes, in one column order both
 * dialects' statements use (the SQLite writer's prepared statements, the PostgreSQL commit
 * function's arguments). Text is bound encoded (text-codec.ts); `*_json` columns hold
 * `JSON.stringify` output, which the encoding never changes. They push onto the caller's array:
 * no array is made per write.
 */
export type BoundValue = string | number | null

/** An optional text column: NULL when absent, else encoded. */
export const textOrNull = (text: string | null | undefined): string | null => (text === undefined || text === null ? null : encodeText(text))

/** A receipt about to be sent, after its run id: step, attempt, provider, reason, then what is known yet, then started_at (13). */
export const pushAttemptValues = (values: BoundValue[], row: NewAttempt): void => {
  values.push(
    row.step,
    row.attempt,
    encodeText(row.provider),
    row.reason,
    row.error_kind ?? null,
    row.http_status ?? null,
    textOrNull(row.error_message),
    row.latency_ms ?? null,
    row.ttft_ms ?? null,
    row.tokens_in ?? null,
    row.tokens_out ?? null,
    textOrNull(row.partial_text),
    encodeText(row.started_at)
  )
}

/** A receipt's settlement: outcome, settled_at, then the columns it may fill (10; NULL leaves one as it is). */
export const pushSettlementValues = (values: BoundValue[], patch: AttemptSettlement): void => {
  values.push(
    patch.outcome,
    encodeText(patch.settled_at),
    patch.error_kind ?? null,
    patch.http_status ?? null,
    textOrNull(patch.error_message),
    patch.latency_ms ?? null,
    patch.ttft_ms ?? null,
    patch.tokens_in ?? null,
    patch.tokens_out ?? null,
    textOrNull(patch.partial_text)
  )
}

/** A step after its run id, with the defaults the `steps` table has for a column the row leaves out (10). */
export const pushStepValues = (values: BoundValue[], row: NewStep): void => {
  values.push(
    row.step,
    encodeText(row.provider),
    encodeText(row.prompt_summary ?? ''),
    encodeText(row.text ?? ''),
    row.tool_calls_json ?? '[]',
    row.results_json ?? null,
    textOrNull(row.feedback),
    row.tokens_in ?? 0,
    row.tokens_out ?? 0,
    encodeText(row.at)
  )
}
