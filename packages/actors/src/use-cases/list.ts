import { type Database, listRuns, type RunRecord, type RunStatus, type StoreError, toRunRecord } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Kysely } from 'kysely'

/** Which runs `Agentvisor.list` returns; without a field, all of them. */
export interface RunFilter {
  readonly status?: RunStatus | undefined
  /** Only the children of this run. */
  readonly parentId?: string | undefined
}

/**
 * The runs as `agentvisor runs --json` prints them (docs/cli.md): `{id, status, goal, parentId,
 * createdAt, updatedAt}`, oldest first (then by id).
 */
export const listRunRecords = (db: Kysely<Database>, filter: RunFilter = {}): Effect.Effect<RunRecord[], StoreError> =>
  Effect.map(listRuns(db, { status: filter.status, parentId: filter.parentId }), (rows) => rows.map(toRunRecord))
