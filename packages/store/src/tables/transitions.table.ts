import type { Insertable, Selectable } from 'kysely'

/**
 * One row per machine transition, in the order the run took them. Rows are only ever appended:
 * the trace and resume both read them back as written.
 */
export interface TransitionsTable {
  run_id: string
  /** 1-based, gap-free per run; (run_id, seq) is the primary key. */
  seq: number
  /** Dotted state paths (`finished.succeeded`). */
  from_state: string
  event: string
  to_state: string
  /** The persisted actor snapshot after the transition; resume restores the last one. */
  snapshot_json: string
  /** ISO-8601. */
  at: string
}

/** A `transitions` row as read. */
export type TransitionRow = Selectable<TransitionsTable>
/** A `transitions` row to append. */
export type NewTransition = Insertable<TransitionsTable>
