import type { Effect } from 'effect/Effect'
import { dialectOf } from '../dialect.js'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'
import { UPDATED } from './attempts.repository.js'
import { decodeToolEffectRow } from '../tables/tool-effects.columns.js'
import type { NewToolEffect, ToolEffectRow } from '../tables/tool-effects.table.js'

/** What `startToolEffect` journals of a call: all but its status and result. */
export type StartedToolEffect = Omit<NewToolEffect, 'status' | 'result_json' | 'completed_at'>

/** Journals a call as `started` (or restarts it: a retried call keeps one row). */
export const startToolEffect = (db: Executor, row: StartedToolEffect): Effect<void, StoreError> =>
  storeCall(
    () => `journal call ${row.position} of step ${row.step} of run ${row.run_id} as started`,
    () => startToolEffectAsync(db, row)
  )

/** `startToolEffect` as a promise, for a transaction of the Kysely writer (run-writer.ts). */
export async function startToolEffectAsync(db: Executor, row: StartedToolEffect): Promise<void> {
  if (dialectOf(db) === 'sqlite') {
    // SQLite cannot UPSERT a view (`tool_effects` is one, see UPDATED): the same as the
    // conflict clause below, as an update of the row if there is one, else an insert.
    const restarted = await db
      .updateTable('tool_effects')
      .set({ status: 'started', name: row.name, arguments: row.arguments, started_at: row.started_at, result_json: null, completed_at: null })
      .where('run_id', '=', row.run_id)
      .where('step', '=', row.step)
      .where('position', '=', row.position)
      .returning(UPDATED)
      .execute()
    if (restarted.length === 0)
      await db
        .insertInto('tool_effects')
        .values({ ...row, status: 'started', result_json: null, completed_at: null })
        .execute()
    return
  }
  await db
    .insertInto('tool_effects')
    .values({ ...row, status: 'started', result_json: null, completed_at: null })
    .onConflict((oc) =>
      oc
        .columns(['run_id', 'step', 'position'])
        .doUpdateSet({ status: 'started', name: row.name, arguments: row.arguments, started_at: row.started_at, result_json: null, completed_at: null })
    )
    .execute()
}

/** Journals a call's result; answers false when it was not started. */
export const completeToolEffect = (db: Executor, runId: string, step: number, position: number, resultJson: string, at: string): Effect<boolean, StoreError> =>
  storeCall(
    () => `journal call ${position} of step ${step} of run ${runId} as completed`,
    () => completeToolEffectAsync(db, runId, step, position, resultJson, at)
  )

/** `completeToolEffect` as a promise, for a transaction of the Kysely writer (run-writer.ts). */
export async function completeToolEffectAsync(db: Executor, runId: string, step: number, position: number, resultJson: string, at: string): Promise<boolean> {
  const updated = await db
    .updateTable('tool_effects')
    .set({ status: 'completed', result_json: resultJson, completed_at: at })
    .where('run_id', '=', runId)
    .where('step', '=', step)
    .where('position', '=', position)
    .returning(UPDATED)
    .execute()
  return updated.length > 0
}

/** A step's journal, by position; fails with `StoreError` when a result does not decode. */
export const listToolEffects = (db: Executor, runId: string, step?: number): Effect<ToolEffectRow[], StoreError> =>
  storeCall(
    () => `load the tool journal of run ${runId}`,
    () => listToolEffectsAsync(db, runId, step)
  )

/** `listToolEffects` as a promise, for the Kysely writer (run-writer.ts). */
export async function listToolEffectsAsync(db: Executor, runId: string, step?: number): Promise<ToolEffectRow[]> {
  let query = db.selectFrom('tool_effects').selectAll().where('run_id', '=', runId)
  if (step !== undefined) query = query.where('step', '=', step)
  return (await query.orderBy('step').orderBy('position').execute()).map(decodeToolEffectRow)
}
