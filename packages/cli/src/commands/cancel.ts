import { Agentvisor } from '@agentvisor/actors'
import { getRun, isFinalStatus, openStore, requestCancel, resolveDbPath } from '@agentvisor/store'
import { printJson, say } from '../output.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'


/**
 * `agentvisor cancel RUN [--db PATH] [--json]`: works from any process. The request goes to the
 * store; a live driver notices it within its poll interval, kills the run's tool processes and
 * ends it `cancelled`. A run nobody drives (paused or interrupted) is ended here.
 */
export const cancelCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(argv, { db: { type: 'string' }, json: { type: 'boolean' } }, { min: 1, max: 1, names: 'RUN (the run to cancel)' })
  const runId = positionals[0]!
  const dbPath = resolveDbPath(values.db)
  const store = await openStore(dbPath)
  let status: string
  try {
    const run = await getRun(store.db, runId)
    if (run === undefined) throw new UsageError(`no run with id ${runId}`)
    if (isFinalStatus(run.status)) {
      say(`agentvisor: run ${runId} already ended (${run.status})`)
      if (values.json === true) printJson({ runId, status: run.status })
      return 0
    }
    await requestCancel(store.db, runId, new Date().toISOString())
  } finally {
    await store.close()
  }
  // Resuming a run whose cancel is requested only writes its final transition; while another
  // process drives it, that driver does the cancelling and this waits for it to finish.
  const av = await Agentvisor.open({ db: dbPath })
  try {
    status = await finish(av, runId, dbPath)
  } finally {
    await av.close()
  }
  say(`agentvisor: run ${runId} ${status}`)
  if (values.json === true) printJson({ runId, status })
  return status === 'cancelled' ? 0 : 1
}

const finish = async (av: Agentvisor, runId: string, dbPath: string): Promise<string> => {
  const until = Date.now() + 10_000
  for (;;) {
    try {
      const run = await av.resume(runId)
      return (await run.result).status
    } catch (error) {
      if ((error as { _tag?: string })._tag !== 'LeaseConflictError') throw error
    }
    const store = await openStore(dbPath)
    try {
      const run = await getRun(store.db, runId)
      if (run !== undefined && isFinalStatus(run.status)) return run.status
    } finally {
      await store.close()
    }
    if (Date.now() > until) throw new UsageError(`run ${runId}: its driver did not stop within 10 s; the cancel request stays recorded`)
    await new Promise((r) => setTimeout(r, 100))
  }
}
