import { Agentvisor } from '@agentvisor/actors'
import { resolveDbPath } from '@agentvisor/store'
import { say } from '../output.js'
import { progressObserver } from '../progress.js'
import { terminalApprover } from '../terminal-approver.js'
import { parseCommandArgs } from '../usage-error.js'
import { awaitWithSignals, exitCodeOf, reportResult } from './run.js'

/** `agentvisor resume RUN [--json] [--db PATH]` */
export const resumeCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    argv,
    { json: { type: 'boolean' }, db: { type: 'string' } },
    { min: 1, max: 1, names: 'RUN (the id of the run to resume)' }
  )
  const startedAt = Date.now()
  const approver = terminalApprover()
  const dbPath = resolveDbPath(values.db)
  const av = await Agentvisor.open({ db: dbPath, observers: [progressObserver(startedAt)], ...(approver === undefined ? {} : { approver }) })
  try {
    const run = await av.resume(positionals[0]!)
    say(`agentvisor: resuming run ${run.runId}`)
    const result = await awaitWithSignals(run)
    await av.close()
    await reportResult(result, values.json === true, startedAt, dbPath)
    return exitCodeOf(result.status)
  } finally {
    await av.close()
  }
}
