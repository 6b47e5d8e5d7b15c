import type { Executor } from '../executor.js'
import { insertForRun } from './run-rows.js'
import { UPDATED } from './attempts.repository.js'
import { decodeStepRow } from '../tables/steps.columns.js'
import type { NewStep, StepRow } from '../tables/steps.table.js'

/** Inserts a step. Rejects when the run already has this step number or does not exist. */
export async function insertStep(db: Executor, row: NewStep): Promise<void> {
  await insertForRun(db, 'steps', row.run_id, (db) => db.insertInto('steps').values(row).execute())
}

/** Records the tool results of a step; returns false when there is no such step. */
export async function setStepResults(db: Executor, runId: string, step: number, resultsJson: string): Promise<boolean> {
  const updated = await db
    .updateTable('steps')
    .set({ results_json: resultsJson })
    .where('run_id', '=', runId)
    .where('step', '=', step)
    .returning(UPDATED)
    .execute()
  return updated.length > 0
}

/** Records the verification feedback given to the model after a step; returns false when there is no such step. */
export async function setStepFeedback(db: Executor, runId: string, step: number, feedback: string): Promise<boolean> {
  const updated = await db.updateTable('steps').set({ feedback }).where('run_id', '=', runId).where('step', '=', step).returning(UPDATED).execute()
  return updated.length > 0
}

/** A run's steps in order; rejects with `StoreError` when one's JSON does not decode. */
export async function listSteps(db: Executor, runId: string, fromStep = 1): Promise<StepRow[]> {
  let query = db.selectFrom('steps').selectAll().where('run_id', '=', runId)
  if (fromStep > 1) query = query.where('step', '>=', fromStep)
  return (await query.orderBy('step').execute()).map(decodeStepRow)
}

/**
 * The text of a run's last step that answered with text (what its `done` message carries as
 * `result`), or undefined: one row read, whatever the run's length.
 */
export async function lastStepText(db: Executor, runId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('steps')
    .select('text')
    .where('run_id', '=', runId)
    .where('text', '!=', '')
    .orderBy('step', 'desc')
    .limit(1)
    .executeTakeFirst()
  return row?.text
}
