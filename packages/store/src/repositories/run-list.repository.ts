// Apart from runs.repository.ts: `agentvisor runs` lists runs through the narrow entry (runs.ts),
// which must not load the Schemas that decode the other reads' JSON columns, nor Effect: here the
// list is a promise, and runs.repository.ts makes the store's `listRuns` Effect of it.
import type { Executor } from '../executor.js'
import type { RunListRow, RunStatus } from '../tables/runs.table.js'

/** Filters for `listRuns`; all optional. */
export interface ListRunsOptions {
  readonly status?: RunStatus | undefined
  readonly parentId?: string | undefined
  readonly limit?: number | undefined
}

/** Every column of `runs` but its JSON one (`error_json`): what a list shows needs none. */
export const RUN_LIST_COLUMNS = [
  'id',
  'parent_id',
  'status',
  'goal',
  'state',
  'steps',
  'created_at',
  'updated_at',
  'ended_at',
  'lease_owner',
  'lease_expires_at',
  'lease_token',
  'cancel_requested_at',
  'root_id',
  'usage_json'
] as const satisfies ReadonlyArray<keyof RunListRow>

/** `listRuns` (runs.repository.ts) as a promise: runs oldest first (by `created_at`, then `id` so equal timestamps keep a stable order). */
export async function listRunsAsync(db: Executor, options: ListRunsOptions = {}): Promise<RunListRow[]> {
  let query = db.selectFrom('runs').select(RUN_LIST_COLUMNS)
  if (options.status !== undefined) query = query.where('status', '=', options.status)
  if (options.parentId !== undefined) query = query.where('parent_id', '=', options.parentId)
  query = query.orderBy('created_at').orderBy('id')
  if (options.limit !== undefined) query = query.limit(options.limit)
  return query.execute()
}
