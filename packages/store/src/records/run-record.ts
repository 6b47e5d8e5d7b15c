import type { RunListRow, RunStatus } from '../tables/runs.table.js'

/** A run as `runs --json`, `show --json` and the NATS status reply present it (docs/cli.md, `--json`). */
export interface RunRecord {
  readonly id: string
  readonly status: RunStatus
  readonly goal: string
  readonly parentId: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

/** Maps a `runs` row to its public JSON shape; keys in the documented order. */
export function toRunRecord(row: Pick<RunListRow, 'id' | 'status' | 'goal' | 'parent_id' | 'created_at' | 'updated_at'>): RunRecord {
  return {
    id: row.id,
    status: row.status,
    goal: row.goal,
    parentId: row.parent_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at
  }
}
