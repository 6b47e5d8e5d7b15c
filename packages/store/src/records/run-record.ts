import type { RunListRow, RunStatus } from '../tables/runs.table.js'

/** A run as `runs --json`, `show --json` and the NATS status reply present it (docs/cli.md, `--json`). */
export interface RunRecord {
  readonly id: string
  readonly status: RunStatus
  readonly goal: string
  readonly parentId: string | null
  readonly createdAt: string
  readonly updatedAt: string
  /**
   * What the run's own calls cost, `{inputTokens, outputTokens, costUsd?}`, as of when its driver
   * last let it go (docs/task-file.md, "Usage and budgets"); absent before that.
   */
  readonly usage?: RecordedUsage
}

/** A run's usage as its row keeps it (core's `Usage`; this entry loads no Effect). */
export interface RecordedUsage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUsd?: number
}

/** Maps a `runs` row to its public JSON shape; keys in the documented order. */
export function toRunRecord(
  row: Pick<RunListRow, 'id' | 'status' | 'goal' | 'parent_id' | 'created_at' | 'updated_at'> & { readonly usage_json?: string | null }
): RunRecord {
  const usage = recordedUsage(row.usage_json)
  return {
    id: row.id,
    status: row.status,
    goal: row.goal,
    parentId: row.parent_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    ...(usage !== undefined ? { usage } : {})
  }
}

/** `runs.usage_json` read back; undefined when absent or not what agentvisor writes (never a throw: a list must not fail on it). */
export const recordedUsage = (json: string | null | undefined): RecordedUsage | undefined => {
  if (json == null) return undefined
  try {
    const value = JSON.parse(json) as Partial<Record<keyof RecordedUsage, unknown>> | null
    if (value === null || typeof value.inputTokens !== 'number' || typeof value.outputTokens !== 'number') return undefined
    const { inputTokens, outputTokens, costUsd } = value
    return typeof costUsd === 'number' ? { inputTokens, outputTokens, costUsd } : { inputTokens, outputTokens }
  } catch {
    return undefined
  }
}
