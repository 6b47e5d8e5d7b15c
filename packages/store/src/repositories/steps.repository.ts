import type { Effect } from 'effect/Effect'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'
import { insertForRun } from './run-rows.js'
import { UPDATED } from './attempts.repository.js'
import { decodeStepRow } from '../tables/steps.columns.js'
import type { NewStep, StepRow } from '../tables/steps.table.js'

/** Inserts a step. Fails when the run already has this step number or does not exist. */
export const insertStep = (db: Executor, row: NewStep): Effect<void, StoreError> =>
  storeCall(
    () => `record step ${row.step} of run ${row.run_id}`,
    () => insertStepAsync(db, row)
  )

/** `insertStep` as a promise, for a transaction of the Kysely writer (run-writer.ts). */
export async function insertStepAsync(db: Executor, row: NewStep): Promise<void> {
  await insertForRun(db, 'steps', row.run_id, (db) => db.insertInto('steps').values(row).execute())
}

/** Records the tool results of a step; answers false when there is no such step. */
export const setStepResults = (db: Executor, runId: string, step: number, resultsJson: string): Effect<boolean, StoreError> =>
  storeCall(
    () => `record the tool results of step ${step} of run ${runId}`,
    () => setStepResultsAsync(db, runId, step, resultsJson)
  )

/** `setStepResults` as a promise, for a transaction of the Kysely writer (run-writer.ts). */
export async function setStepResultsAsync(db: Executor, runId: string, step: number, resultsJson: string): Promise<boolean> {
  const updated = await db
    .updateTable('steps')
    .set({ results_json: resultsJson })
    .where('run_id', '=', runId)
    .where('step', '=', step)
    .returning(UPDATED)
    .execute()
  return updated.length > 0
}

/** Records the verification feedback given to the model after a step; answers false when there is no such step. */
export const setStepFeedback = (db: Executor, runId: string, step: number, feedback: string): Effect<boolean, StoreError> =>
  storeCall(
    () => `record the feedback of step ${step} of run ${runId}`,
    () => setStepFeedbackAsync(db, runId, step, feedback)
  )

/** `setStepFeedback` as a promise, for a transaction of the Kysely writer (run-writer.ts). */
export async function setStepFeedbackAsync(db: Executor, runId: string, step: number, feedback: string): Promise<boolean> {
  const updated = await db.updateTable('steps').set({ feedback }).where('run_id', '=', runId).where('step', '=', step).returning(UPDATED).execute()
  return updated.length > 0
}

/** A run's steps in order; fails with `StoreError` when one's JSON does not decode. */
export const listSteps = (db: Executor, runId: string, fromStep = 1): Effect<StepRow[], StoreError> =>
  storeCall(
    () => `load the steps of run ${runId}`,
    () => listStepsAsync(db, runId, fromStep)
  )

/** `listSteps` as a promise, for the Kysely writer (run-writer.ts). */
export async function listStepsAsync(db: Executor, runId: string, fromStep = 1): Promise<StepRow[]> {
  let query = db.selectFrom('steps').selectAll().where('run_id', '=', runId)
  if (fromStep > 1) query = query.where('step', '>=', fromStep)
  return (await query.orderBy('step').execute()).map(decodeStepRow)
}

/**
 * The text of a run's last step that answered with text (what its `done` message carries as
 * `result`), or undefined: one row read, whatever the run's length.
 */
export const lastStepText = (db: Executor, runId: string): Effect<string | undefined, StoreError> =>
  storeCall(
    () => `read the last answer of run ${runId}`,
    () => lastStepTextAsync(db, runId)
  )

/** `lastStepText` as a promise, for the Kysely writer (run-writer.ts). */
export async function lastStepTextAsync(db: Executor, runId: string): Promise<string | undefined> {
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
