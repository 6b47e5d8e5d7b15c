import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from '../database.js'
import type { Executor } from '../executor.js'
import { decodeText, encodeText } from '../text-codec.js'
import { UPDATED } from './attempts.repository.js'
import { decodeStepRow } from '../tables/steps.columns.js'
import type { NewStep, StepRow } from '../tables/steps.table.js'

/** Inserts a step. Rejects when the run already has this step number or does not exist. */
export async function insertStep(db: Executor, row: NewStep): Promise<void> {
  await db.insertInto('steps').values(row).execute()
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
export async function listSteps(db: Executor, runId: string): Promise<StepRow[]> {
  return (await db.selectFrom('steps').selectAll().where('run_id', '=', runId).orderBy('step').execute()).map(decodeStepRow)
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

/**
 * `lastStepText` of one store, as a function of the run: on SQLite one prepared statement, read
 * at once, since every run's end asks it (its `done` message) and Kysely builds, locks and
 * prepares the query anew each time, ~0.4 ms a run with 1,000 runs at once. While a Kysely
 * transaction holds the connection, the read waits for it through Kysely, as before.
 */
export function lastStepTextOf(store: {
  readonly db: Kysely<Database>
  readonly sqlite: BetterSqlite3.Database | undefined
}): (runId: string) => Promise<string | undefined> {
  const { db, sqlite } = store
  if (sqlite === undefined) return (runId) => lastStepText(db, runId)
  let prepared: BetterSqlite3.Statement | undefined
  return (runId) => {
    if (sqlite.inTransaction) return lastStepText(db, runId)
    try {
      prepared ??= sqlite.prepare("SELECT text FROM steps WHERE run_id = ? AND text != '' ORDER BY step DESC LIMIT 1").pluck()
      const text = prepared.get(encodeText(runId)) as string | undefined
      return Promise.resolve(text === undefined ? undefined : decodeText(text))
    } catch (cause) {
      return Promise.reject(cause)
    }
  }
}
