import type { Insertable, Selectable } from 'kysely'

/**
 * The run's transition journal (docs/durability.md, "The journal"): one row per commit, holding
 * the commit's transitions in order and the machine's persisted snapshot after the last of them.
 * Rows are only ever appended. Resume restores the last entry's snapshot; the snapshot after an
 * earlier transition of an entry is the machine's to replay (packages/actors), not the store's.
 */
export interface JournalEntriesTable {
  run_id: string
  /** The seq of the entry's last transition; (run_id, seq) is the primary key. */
  seq: number
  /** The seq of the entry's first transition: seqs are 1-based and gap-free per run. */
  first_seq: number
  /** A JSON array of `JournalTransition`, in seq order. */
  transitions_json: string
  /** The persisted snapshot after the last transition, in its versioned envelope (`{"v":1,"snapshot":...}`). */
  snapshot_json: string
}

/** A `journal_entries` row as read. */
export type JournalEntryRow = Selectable<JournalEntriesTable>
/** A `journal_entries` row to append. */
export type NewJournalEntry = Insertable<JournalEntriesTable>

/** One transition as an entry holds it. */
export interface JournalTransition {
  readonly seq: number
  /** Dotted state paths (`finished.succeeded`). */
  readonly from: string
  /** The event the machine took, whole: replayed through the machine it gives the snapshot after it. */
  readonly event: { readonly type: string; readonly [field: string]: unknown }
  readonly to: string
  /** ISO-8601. */
  readonly at: string
}
