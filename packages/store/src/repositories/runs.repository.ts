import type { Executor } from '../executor.js'
import type { NewRun, RunRow, RunStatus, RunUpdate, RunWithContract } from '../tables/runs.table.js'

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

/**
 * Inserts a run row and its contract, in one transaction (its own unless `db` already is one).
 * Rejects if the id exists or `parent_id` names no run.
 */
export async function insertRun(db: Executor, row: NewRun): Promise<void> {
  if (!db.isTransaction) return db.transaction().execute((trx) => insertRun(trx, row))
  const { contract_json, ...run } = row
  await db.insertInto('runs').values(run).execute()
  await db.insertInto('run_contracts').values({ run_id: run.id, contract_json }).execute()
}

/** Runs with their contracts (the contract lives in its own table). */
const withContracts = (db: Executor) =>
  db.selectFrom('runs').innerJoin('run_contracts', 'run_contracts.run_id', 'runs.id').selectAll('runs').select('run_contracts.contract_json')

/** The run with this id and its contract, or `undefined`. */
export async function getRun(db: Executor, id: string): Promise<RunWithContract | undefined> {
  return withContracts(db).where('runs.id', '=', id).executeTakeFirst()
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

/** The direct children of a run with their contracts, oldest first. */
export async function listChildren(db: Executor, parentId: string): Promise<RunWithContract[]> {
  return withContracts(db).where('runs.parent_id', '=', parentId).orderBy('runs.created_at').orderBy('runs.id').execute()
}

/** Applies `patch` to the run and returns the updated row, or `undefined` if there is no such run. */
export async function updateRun(db: Executor, id: string, patch: RunPatch): Promise<RunRow | undefined> {
  return db.updateTable('runs').set(patch).where('id', '=', id).returningAll().executeTakeFirst()
}
