import type { Executor } from '../executor.js'
import type { NewTransition, TransitionRow } from '../tables/transitions.table.js'

/**
 * Appends one transition. Rejects when `(run_id, seq)` is taken (two writers raced for the same
 * run, or a replay tried to rewrite history) or when the run does not exist.
 */
export async function appendTransition(db: Executor, row: NewTransition): Promise<void> {
  await db.insertInto('transitions').values(row).execute()
}

/** A run's transitions in the order they happened. */
export async function listTransitions(db: Executor, runId: string): Promise<TransitionRow[]> {
  return db.selectFrom('transitions').selectAll().where('run_id', '=', runId).orderBy('seq').execute()
}

/** The latest transition of a run (what resume restores), or `undefined` before the first. */
export async function lastTransition(db: Executor, runId: string): Promise<TransitionRow | undefined> {
  return db.selectFrom('transitions').selectAll().where('run_id', '=', runId).orderBy('seq', 'desc').limit(1).executeTakeFirst()
}
