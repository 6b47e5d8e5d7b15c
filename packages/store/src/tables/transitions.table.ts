import type { Selectable } from 'kysely'

/**
 * One row per machine transition, in the order the run took them: a read-only view of the
 * journal entries (see journal-entries.table.ts), with the columns the table of one row per
 * transition had before the compact journal (docs/durability.md, "The journal").
 */
export interface TransitionsTable {
  run_id: string
  /** 1-based, gap-free per run. */
  seq: number
  /** Dotted state paths (`finished.succeeded`). */
  from_state: string
  /** The event's type. */
  event: string
  to_state: string
  /**
   * The entry's snapshot (in its versioned envelope) on the last transition of its entry, null on
   * the ones before it, whose snapshots the machine replays.
   */
  snapshot_json: string | null
  /** ISO-8601. */
  at: string
}

/** A `transitions` row as read. */
export type TransitionRow = Selectable<TransitionsTable>

/** A transition stored as an entry of its own, with its own snapshot (`appendTransition`). */
export interface NewTransition {
  readonly run_id: string
  readonly seq: number
  readonly from_state: string
  readonly event: string
  readonly to_state: string
  readonly snapshot_json: string
  readonly at: string
}
