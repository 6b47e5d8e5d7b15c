import type { ErrorKind } from '@agentvisor/core'
import type { Insertable, Selectable, Updateable } from 'kysely'

/** Why a model call was made (docs/cli.md, `attempts[].reason`). */
export const AttemptReason = {
  initial: 'initial',
  retry: 'retry',
  fallover: 'fallover'
} as const
export type AttemptReason = (typeof AttemptReason)[keyof typeof AttemptReason]

/**
 * How a model call ended. `pending` is the receipt written before the dispatch; `unknown` means
 * the provider may have done the work (network reset, stream cut, or a crash mid-call).
 */
export const AttemptOutcome = {
  pending: 'pending',
  ok: 'ok',
  failed: 'failed',
  unknown: 'unknown',
  cancelled: 'cancelled'
} as const
export type AttemptOutcome = (typeof AttemptOutcome)[keyof typeof AttemptOutcome]

/** Every outcome but `pending`: what a receipt can be settled to. */
export type SettledAttemptOutcome = Exclude<AttemptOutcome, typeof AttemptOutcome.pending>

/** One receipt per model call: written `pending` before the dispatch, settled after it. */
export interface AttemptsTable {
  run_id: string
  step: number
  /** 0-based index within the step; (run_id, step, attempt) is the primary key. */
  attempt: number
  provider: string
  reason: AttemptReason
  outcome: AttemptOutcome
  error_kind: ErrorKind | null
  http_status: number | null
  error_message: string | null
  latency_ms: number | null
  /** Time to first token; null when unknown, never 0 as a stand-in. */
  ttft_ms: number | null
  tokens_in: number | null
  tokens_out: number | null
  /** What streamed before a cut or a cancel, kept for the trace. */
  partial_text: string | null
  /** ISO-8601. */
  started_at: string
  /** ISO-8601; null while pending. */
  settled_at: string | null
}

/** An `attempts` row as read. */
export type AttemptRow = Selectable<AttemptsTable>
/** A receipt to write before a dispatch; its outcome is always `pending`, so it is not given. */
export type NewAttempt = Omit<Insertable<AttemptsTable>, 'outcome' | 'settled_at'>
/** What settling a receipt sets: a final outcome, when, and whatever the call reported. */
export type AttemptSettlement = Omit<
  Updateable<AttemptsTable>,
  'run_id' | 'step' | 'attempt' | 'provider' | 'reason' | 'started_at' | 'outcome' | 'settled_at'
> & {
  readonly outcome: SettledAttemptOutcome
  readonly settled_at: string
}
