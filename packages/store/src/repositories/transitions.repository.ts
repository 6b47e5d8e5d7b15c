import type { Effect } from 'effect/Effect'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'
import type { NewTransition, TransitionRow } from '../tables/transitions.table.js'
import { appendJournalEntry, type JournalHead, journalEntry, lastJournalEntry } from './journal-entries.repository.js'

/**
 * Appends one transition as a journal entry of its own, with its own snapshot (what a transition
 * of a store from before the compact journal became). Fails when `(run_id, seq)` is taken or
 * when the run does not exist.
 */
export const appendTransition = (db: Executor, row: NewTransition): Effect<void, StoreError> => {
  const transition = { seq: row.seq, from: row.from_state, event: { type: row.event }, to: row.to_state, at: row.at }
  return appendJournalEntry(db, journalEntry(row.run_id, [transition], row.snapshot_json))
}

/** A run's transitions in the order they happened (the `transitions` view of its journal). */
export const listTransitions = (db: Executor, runId: string, fromSeq = 1): Effect<TransitionRow[], StoreError> =>
  storeCall(
    () => `load the transitions of run ${runId}`,
    () => {
      let query = db.selectFrom('transitions').selectAll().where('run_id', '=', runId)
      if (fromSeq > 1) query = query.where('seq', '>=', fromSeq)
      return query.orderBy('seq').execute()
    }
  )

/** The latest transition's seq and the snapshot after it (what resume restores), or `undefined` before the first. */
export const lastTransition = (db: Executor, runId: string): Effect<JournalHead | undefined, StoreError> => lastJournalEntry(db, runId)
