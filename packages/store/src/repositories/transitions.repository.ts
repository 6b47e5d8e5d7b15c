import type { Executor } from '../executor.js'
import type { NewTransition, TransitionRow } from '../tables/transitions.table.js'
import { appendJournalEntry, type JournalHead, journalEntry, lastJournalEntry } from './journal-entries.repository.js'

/**
 * Appends one transition as a journal entry of its own, with its own snapshot (what a transition
 * of a store from before the compact journal became). Rejects when `(run_id, seq)` is taken or
 * when the run does not exist.
 */
export async function appendTransition(db: Executor, row: NewTransition): Promise<void> {
  const transition = { seq: row.seq, from: row.from_state, event: { type: row.event }, to: row.to_state, at: row.at }
  await appendJournalEntry(db, journalEntry(row.run_id, [transition], row.snapshot_json))
}

/** A run's transitions in the order they happened (the `transitions` view of its journal). */
export async function listTransitions(db: Executor, runId: string, fromSeq = 1): Promise<TransitionRow[]> {
  let query = db.selectFrom('transitions').selectAll().where('run_id', '=', runId)
  if (fromSeq > 1) query = query.where('seq', '>=', fromSeq)
  return query.orderBy('seq').execute()
}

/** The latest transition's seq and the snapshot after it (what resume restores), or `undefined` before the first. */
export async function lastTransition(db: Executor, runId: string): Promise<JournalHead | undefined> {
  return lastJournalEntry(db, runId)
}
