import { Agentvisor, CancelTimeoutError } from '@agentvisor/actors'
import { existingStorePath } from '../store-path.js'
import { printJson, say } from '../output.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'

/**
 * `agentvisor cancel RUN [--db PATH] [--json]`: works from any process, through
 * `Agentvisor.cancel`. The request goes to the store; a live driver notices it within its poll
 * interval, kills the run's tool processes and ends it `cancelled`; a run nobody drives (paused
 * or interrupted) is ended here. Exit 0 when the run ends cancelled (or had already ended), 1
 * when it ended otherwise, 2 when it is unknown or its driver does not stop within 10 s.
 */
export const cancelCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    argv,
    { db: { type: 'string' }, json: { type: 'boolean' } },
    { min: 1, max: 1, names: 'RUN (the run to cancel)' }
  )
  const runId = positionals[0]!
  const av = await Agentvisor.open({ db: existingStorePath(values.db) })
  let outcome
  try {
    outcome = await av.cancel(runId)
  } catch (error) {
    throw error instanceof CancelTimeoutError ? new UsageError(error.message) : error
  } finally {
    await av.close()
  }
  const { status } = outcome
  say(outcome.alreadyEnded ? `agentvisor: run ${runId} already ended (${status})` : `agentvisor: run ${runId} ${status}`)
  if (values.json === true) printJson({ runId, status })
  return outcome.alreadyEnded || status === 'cancelled' ? 0 : 1
}
