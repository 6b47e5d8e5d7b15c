import type { Store } from '@agentvisor/store/open'
import {
  decodeJsonText,
  decodeRows,
  isInterrupted,
  isPostgresUrl,
  listRunsAsync,
  openCurrentSqlite,
  RUN_LIST_COLUMNS,
  type RunListRow,
  type RunRecord,
  type RecordedUsage,
  recordedUsage,
  RunStatus,
  toRunRecord
} from '@agentvisor/store/runs'
import { existingStorePath } from '../store-path.js'
import { printJsonText } from '../output.js'
import { terminalSafe } from '../terminal-text.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'

const STATUSES: ReadonlyArray<string> = Object.values(RunStatus)

/** A SQLite connection, as the store holds one. */
type Sqlite = NonNullable<Store['sqlite']>

/** `agentvisor runs [--json] [--status S] [--db PATH]` */
export const runsCommand = async (argv: string[]): Promise<number> => {
  const { values } = parseCommandArgs(argv, { json: { type: 'boolean' }, status: { type: 'string' }, db: { type: 'string' } }, { min: 0, max: 0, names: '' })
  const status = values.status
  if (status !== undefined && !STATUSES.includes(status)) {
    throw new UsageError(`--status must be one of ${STATUSES.join(', ')} (got "${status}")`)
  }
  const location = existingStorePath(values.db)
  // A current SQLite store is read with better-sqlite3 alone; anything else (PostgreSQL, a new
  // or outdated file) is opened the long way, which loads Kysely and migrates if need be.
  const sqlite = isPostgresUrl(location) ? undefined : openCurrentSqlite(location)
  const store = sqlite === undefined ? await (await import('@agentvisor/store/open')).openStore(location, { readOnly: true }) : undefined
  const reader = sqlite ?? store!.sqlite
  try {
    if (values.json === true) {
      printJsonText(reader !== undefined ? sqliteRecordsJson(reader, status) : await recordsJson(store!, status))
      return 0
    }
    const rows = reader !== undefined ? sqliteRows(reader, status) : await listRunsAsync(store!.db, status === undefined ? {} : { status: status as RunStatus })
    const now = Date.now()
    // Interrupted runs (running, but nobody drives them) are what `resume --all` picks up.
    const runs = rows.map((row) => ({ ...toRunRecord(row), status: isInterrupted(row, now) ? `${row.status} (interrupted)` : row.status }))
    if (runs.length === 0) {
      process.stdout.write('no runs\n')
      return 0
    }
    // One write for the whole table, not one per run.
    process.stdout.write(
      runs
        .map((run) => {
          // A child names its parent by the short id progress lines use (`[0b7c1d2e]`); a root has "-".
          const parent = (run.parentId === null ? '-' : run.parentId.slice(0, 8)).padEnd(8)
          return `${terminalSafe(`${run.id}  ${run.status.padEnd(23)}  ${run.createdAt}  ${parent}  ${run.goal.replace(/\s+/g, ' ').slice(0, 60)}`)}\n`
        })
        .join('')
    )
    return 0
  } finally {
    sqlite?.close()
    await store?.close()
  }
}

/** `columns` of the runs with `status` (all without), in `listRuns`' order: `created_at`, then `id`. */
const selectRuns = (sqlite: Sqlite, columns: string, status: string | undefined) =>
  sqlite
    .prepare(`SELECT ${columns} FROM runs ${status === undefined ? '' : 'WHERE status = ?'} ORDER BY created_at, id`)
    .bind(...(status === undefined ? [] : [status]))

/** `listRuns` on SQLite, in prepared SQL: the same rows (the same columns) in the same order. */
const sqliteRows = (sqlite: Sqlite, status: string | undefined): RunListRow[] =>
  decodeRows(selectRuns(sqlite, RUN_LIST_COLUMNS.join(', '), status).all() as RunListRow[])

/**
 * The `runs --json` array, serialised: what `JSON.stringify(listRuns(...).map(toRunRecord))`
 * gives, in the same order (`created_at`, then `id`), read without building a row per run.
 *
 * On SQLite the database writes each run's object itself: `json_object` keeps the keys in the
 * order given and escapes strings exactly as `JSON.stringify` does. Ten thousand runs then cost
 * ten thousand strings rather than ten thousand rows of six strings each, then `RunRecord`s, then
 * their serialisation: about 70 ms down to 30 ms of `agentvisor runs --json`. On other dialects
 * the six columns are read already under their `RunRecord` names and in their order.
 */
const sqliteRecordsJson = (sqlite: Sqlite, status: string | undefined): string => {
  const record = `json_object('id', id, 'status', status, 'goal', goal, 'parentId', parent_id, 'createdAt', created_at, 'updatedAt', updated_at, 'usage', json(coalesce(usage_json, ${SUMMED_USAGE})))`
  const objects = selectRuns(sqlite, record, status).pluck().all() as string[]
  // A goal is stored encoded (docs/deploy.md, "Text in the store"): undone in the JSON itself.
  return decodeJsonText(`[${objects.join(',')}]`)
}

/**
 * A run's usage while it runs (its row has none until its driver lets it go): its receipts'
 * tokens summed, without dollars (docs/cli.md, `runs --json`).
 */
const SUMMED_USAGE = `(select json_object('inputTokens', coalesce(sum(tokens_in), 0), 'outputTokens', coalesce(sum(tokens_out), 0)) from run_log where run_id = runs.id and kind = 'a')`

/** The same array on other dialects: the columns read under their `RunRecord` names, in order. */
const recordsJson = async (store: Store, status: string | undefined): Promise<string> => {
  let query = store.db
    .selectFrom('runs')
    .select(['id', 'status', 'goal', 'parent_id as parentId', 'created_at as createdAt', 'updated_at as updatedAt', 'usage_json'])
  if (status !== undefined) query = query.where('status', '=', status as RunStatus)
  const rows = await query.orderBy('created_at').orderBy('id').execute()
  const running = rows.filter((row) => row.usage_json === null).map((row) => row.id)
  const summed = new Map<string, RecordedUsage>()
  for (let i = 0; i < running.length; i += 1000) {
    const totals = await store.db
      .selectFrom('attempts')
      .select((eb) => ['run_id', eb.fn.sum<number>('tokens_in').as('tokens_in'), eb.fn.sum<number>('tokens_out').as('tokens_out')])
      .where('run_id', 'in', running.slice(i, i + 1000))
      .groupBy('run_id')
      .execute()
    for (const t of totals) summed.set(t.run_id, { inputTokens: Number(t.tokens_in ?? 0), outputTokens: Number(t.tokens_out ?? 0) })
  }
  const records: RunRecord[] = rows.map(({ usage_json, ...record }) => ({
    ...record,
    usage: recordedUsage(usage_json) ?? summed.get(record.id) ?? { inputTokens: 0, outputTokens: 0 }
  }))
  return JSON.stringify(records)
}
