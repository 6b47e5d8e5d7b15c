import type { Executor } from '../executor.js'
import { decodeToolEffectRow } from '../tables/tool-effects.columns.js'
import type { NewToolEffect, ToolEffectRow } from '../tables/tool-effects.table.js'

/** Journals a call as `started` (or restarts it: a retried call keeps one row). */
export async function startToolEffect(db: Executor, row: Omit<NewToolEffect, 'status' | 'result_json' | 'completed_at'>): Promise<void> {
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

/** Journals a call's result; returns false when it was not started. */
export async function completeToolEffect(db: Executor, runId: string, step: number, position: number, resultJson: string, at: string): Promise<boolean> {
  const result = await db
    .updateTable('tool_effects')
    .set({ status: 'completed', result_json: resultJson, completed_at: at })
    .where('run_id', '=', runId)
    .where('step', '=', step)
    .where('position', '=', position)
    .executeTakeFirst()
  return result.numUpdatedRows > 0n
}

/** A step's journal, by position; rejects with `StoreError` when a result does not decode. */
export async function listToolEffects(db: Executor, runId: string, step?: number): Promise<ToolEffectRow[]> {
  let query = db.selectFrom('tool_effects').selectAll().where('run_id', '=', runId)
  if (step !== undefined) query = query.where('step', '=', step)
  return (await query.orderBy('step').orderBy('position').execute()).map(decodeToolEffectRow)
}
