import { say } from '../output.js'
import { withInspectDefault } from '../stately-inspect.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'
import { driveOne } from './run.js'

/**
 * `agentvisor fork RUN --at SEQ [--json] [--db PATH] [--nats URL] [--inspect [URL]]`: a new run
 * from RUN's state after transition SEQ, driven like `resume` drives a run (docs/cli.md, `fork`).
 */
export const forkCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    withInspectDefault(argv),
    { at: { type: 'string' }, json: { type: 'boolean' }, db: { type: 'string' }, nats: { type: 'string' }, inspect: { type: 'string' } },
    { min: 1, max: 1, names: 'RUN (the run to fork)' }
  )
  const runId = positionals[0]!
  if (values.at === undefined) throw new UsageError('fork needs --at SEQ: the transition whose state the fork starts from (agentvisor show RUN lists them)')
  const seq = Number(values.at)
  if (!/^\d+$/.test(values.at) || !Number.isSafeInteger(seq) || seq < 1)
    throw new UsageError(`--at must be a transition's seq, a whole number from 1 (got "${values.at}")`)
  return driveOne({ db: values.db, nats: values.nats, json: values.json === true, inspect: values.inspect, existing: true }, async (av) => {
    const run = await av.fork(runId, { atSeq: seq })
    say(`agentvisor: run ${run.runId} forked from run ${runId} at seq ${seq}`)
    return run
  })
}
