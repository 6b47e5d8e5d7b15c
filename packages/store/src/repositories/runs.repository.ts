import type { Executor } from '../executor.js'
import type { NewRun, RunRow, RunStatus, RunUpdate } from '../tables/runs.table.js'

/** Filters for `listRuns`; all optional. */
export interface ListRunsOptions {
  readonly status?: RunStatus | undefined
  readonly parentId?: string | undefined
  readonly limit?: number | undefined
}

/**
 * The columns `updateRun` may change. `updated_at` is required so that no write can forget to
 * move it; the key and the creation time never change.
 */
export type RunPatch = Omit<RunUpdate, 'id' | 'created_at' | 'updated_at'> & { readonly updated_at: string }

/** Inserts a run row. Rejects if the id exists or `parent_id` names no run. */
export async function insertRun(db: Executor, row: NewRun): Promise<void> {
  await db.insertInto('runs').values(row).execute()
}

/** The run with this id, or `undefined`. */
export async function getRun(db: Executor, id: string): Promise<RunRow | undefined> {
  return db.selectFrom('runs').selectAll().where('id', '=', id).executeTakeFirst()
}

/** Runs oldest first (by `created_at`, then `id` so equal timestamps keep a stable order). */
export async function listRuns(db: Executor, options: ListRunsOptions = {}): Promise<RunRow[]> {
  let query = db.selectFrom('runs').selectAll()
  if (options.status !== undefined) query = query.where('status', '=', options.status)
  if (options.parentId !== undefined) query = query.where('parent_id', '=', options.parentId)
  query = query.orderBy('created_at').orderBy('id')
  if (options.limit !== undefined) query = query.limit(options.limit)
  return query.execute()
}

/** The direct children of a run, oldest first. */
export async function listChildren(db: Executor, parentId: string): Promise<RunRow[]> {
  return listRuns(db, { parentId })
}

/** Applies `patch` to the run and returns the updated row, or `undefined` if there is no such run. */
export async function updateRun(db: Executor, id: string, patch: RunPatch): Promise<RunRow | undefined> {
  return db.updateTable('runs').set(patch).where('id', '=', id).returningAll().executeTakeFirst()
}
