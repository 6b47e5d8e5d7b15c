import { isInterrupted, listRuns, RunStatus, toRunRecord } from '@agentvisor/store'
import { openCliStore } from '../open-store.js'
import { printJson } from '../output.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'

const STATUSES: ReadonlyArray<string> = Object.values(RunStatus)

/** `agentvisor runs [--json] [--status S] [--db PATH]` */
export const runsCommand = async (argv: string[]): Promise<number> => {
  const { values } = parseCommandArgs(
    argv,
    { json: { type: 'boolean' }, status: { type: 'string' }, db: { type: 'string' } },
    { min: 0, max: 0, names: '' }
  )
  const status = values.status
  if (status !== undefined && !STATUSES.includes(status)) {
    throw new UsageError(`--status must be one of ${STATUSES.join(', ')} (got "${status}")`)
  }
  const store = await openCliStore(values.db)
  try {
    const rows = await listRuns(store.db, status === undefined ? {} : { status: status as RunStatus })
    if (values.json === true) {
      printJson(rows.map(toRunRecord))
      return 0
    }
    const now = Date.now()
    // Interrupted runs (running, but nobody drives them) are what `resume --all` picks up.
    const runs = rows.map((row) => ({ ...toRunRecord(row), status: isInterrupted(row, now) ? `${row.status} (interrupted)` : row.status }))
    if (runs.length === 0) {
      process.stdout.write('no runs\n')
      return 0
    }
    for (const run of runs) {
      process.stdout.write(`${run.id}  ${run.status.padEnd(23)}  ${run.createdAt}  ${run.goal.replace(/\s+/g, ' ').slice(0, 60)}\n`)
    }
    return 0
  } finally {
    await store.close()
  }
}
