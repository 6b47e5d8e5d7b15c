import type { Effect } from 'effect/Effect'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'
import { insertForRun } from './run-rows.js'
import type { JournalEntryRow, JournalTransition, NewJournalEntry } from '../tables/journal-entries.table.js'

/** What resume restores: the seq of a run's last transition and the snapshot after it. */
export type JournalHead = Pick<JournalEntryRow, 'seq' | 'snapshot_json'>

/**
 * The entry of one commit: its transitions (at least one, in seq order) and the snapshot after
 * the last, as the writers of every dialect store it.
 */
export const journalEntry = (runId: string, transitions: ReadonlyArray<JournalTransition>, snapshotJson: string): NewJournalEntry => ({
  run_id: runId,
  seq: transitions[transitions.length - 1]!.seq,
  first_seq: transitions[0]!.seq,
  transitions_json: JSON.stringify(transitions),
  snapshot_json: snapshotJson
})

/** `appendJournalEntry` as a promise, for a transaction of the Kysely writer (run-writer.ts). */
export async function appendJournalEntryAsync(db: Executor, row: NewJournalEntry): Promise<void> {
  await insertForRun(db, 'journal_entries', row.run_id, (db) => db.insertInto('journal_entries').values(row).execute())
}

/**
 * Appends one entry. Fails when `(run_id, seq)` is taken (two writers raced for the same run,
 * or a replay tried to rewrite history) or when the run does not exist.
 */
export const appendJournalEntry = (db: Executor, row: NewJournalEntry): Effect<void, StoreError> =>
  storeCall(
    () => `append entry ${row.seq} to run ${row.run_id}'s journal`,
    () => appendJournalEntryAsync(db, row)
  )

/** A run's journal entries in the order they were committed. */
export const listJournalEntries = (db: Executor, runId: string): Effect<JournalEntryRow[], StoreError> =>
  storeCall(
    () => `load run ${runId}'s journal`,
    () => db.selectFrom('journal_entries').selectAll().where('run_id', '=', runId).orderBy('seq').execute()
  )

/** `lastJournalEntry` as a promise, for the Kysely writer (run-writer.ts). */
export async function lastJournalEntryAsync(db: Executor, runId: string): Promise<JournalHead | undefined> {
  return db.selectFrom('journal_entries').select(['seq', 'snapshot_json']).where('run_id', '=', runId).orderBy('seq', 'desc').limit(1).executeTakeFirst()
}

/** The seq and snapshot of a run's last entry (what resume restores), or `undefined` before the first. */
export const lastJournalEntry = (db: Executor, runId: string): Effect<JournalHead | undefined, StoreError> =>
  storeCall(
    () => `load run ${runId}'s last journal entry`,
    () => lastJournalEntryAsync(db, runId)
  )
