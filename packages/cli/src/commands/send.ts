import { say } from '../output.js'
import { withInspectDefault } from '../stately-inspect.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'
import { driveOne } from './run.js'

/** `agentvisor send RUN TEXT [--json] [--db PATH] [--nats URL] [--inspect [URL]]` */
export const sendCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    withInspectDefault(argv),
    { json: { type: 'boolean' }, db: { type: 'string' }, nats: { type: 'string' }, inspect: { type: 'string' } },
    { min: 2, max: 2, names: 'RUN TEXT (the finished run to continue, and the message)' }
  )
  const [runId, text] = positionals as [string, string]
  if (text.trim() === '') throw new UsageError('the message is empty: give the text the model should read')
  return driveOne({ db: values.db, nats: values.nats, json: values.json === true, inspect: values.inspect, existing: true }, async (av) => {
    const run = await av.send(runId, text)
    say(`agentvisor: run ${run.runId} goes on with a new turn`)
    return run
  })
}
