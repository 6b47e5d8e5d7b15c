import { Agentvisor, invalidNatsServers, makeNatsBus, natsBusOptionsFromEnv } from '@agentvisor/actors'
import { type CallableTool, loadTaskFile, loadToolModules, sandboxUnavailable, type TaskContract } from '@agentvisor/core'
import { maskUrlCredentials } from '@agentvisor/core/secrets'
import { Cause, Effect, Either, Exit } from 'effect'
import { resolveDbPath } from '@agentvisor/store'
import { inspectOptions, startInspector, withInspectDefault } from '../stately-inspect.js'
import { terminalSafe } from '../terminal-text.js'
import { storeOutageOption } from '../store-outage.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'

/**
 * `agentvisor worker --nats URL [--db PATH] [--concurrency N] [--tools MODULES] [--submit-template FILE] [--store-outage-ms N] [--inspect [URL]]`:
 * drives child runs from the JetStream work queue (one durable consumer shared by every worker)
 * and answers control requests, until SIGINT/SIGTERM. Logs one line per run it starts and ends.
 * `--submit-template`: also take root runs submitted on `agentvisor.runs.submit`, laid over that
 * task file and never allowed more than it (docs/nats.md, "Submitting runs").
 * `--tools`: comma-separated tool modules whose tools every run of this worker may be offered
 * (docs/tools.md). `--store-outage-ms`: how long a store outage is ridden out (default 60000, or
 * `AGENTVISOR_STORE_OUTAGE_MS`); a run interrupted past it is resumed here once the store is back
 * (docs/durability.md, "A store outage").
 */
export const workerCommand = async (argv: string[]): Promise<number> => {
  const { values } = parseCommandArgs(
    withInspectDefault(argv),
    {
      nats: { type: 'string' },
      db: { type: 'string' },
      concurrency: { type: 'string' },
      tools: { type: 'string' },
      inspect: { type: 'string' },
      'submit-template': { type: 'string' },
      'store-outage-ms': { type: 'string' }
    },
    { min: 0, max: 0, names: '' }
  )
  const nats = natsBusOptionsFromEnv(values.nats === undefined ? {} : { nats: values.nats })
  if (nats === undefined) throw new UsageError('worker needs --nats URL (or AGENTVISOR_NATS_URL)')
  const badServer = invalidNatsServers(nats.servers)
  if (badServer !== undefined) throw new UsageError(`--nats: ${badServer}`)
  const concurrency = values.concurrency === undefined ? 4 : Number(values.concurrency)
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new UsageError(`--concurrency must be a positive whole number (got "${values.concurrency}")`)
  const tools = values.tools === undefined ? [] : await workerTools(values.tools)
  const template = values['submit-template'] === undefined ? undefined : await submitTemplate(values['submit-template'])
  const dbPath = resolveDbPath(values.db)
  const outage = storeOutageOption(values['store-outage-ms'])
  const log = (line: string): void => {
    process.stderr.write(`agentvisor worker: ${terminalSafe(line)}\n`)
  }
  // A server it cannot serve from (no JetStream, no server at all) is one line and exit 2, before anything runs.
  const usable = await Effect.runPromiseExit(Effect.scoped(Effect.flatMap(makeNatsBus(nats), (bus) => bus.checkWorkQueue)))
  if (Exit.isFailure(usable)) {
    const error = Cause.squash(usable.cause)
    throw new UsageError(error instanceof Error ? error.message.split('\n')[0]! : String(error))
  }
  const inspector = await startInspector(values.inspect, log)
  try {
    const av = await Agentvisor.open({
      db: dbPath,
      nats,
      serveChildren: { concurrency },
      serveControl: true,
      // A run a store outage interrupted past the limit is resumed here once the store is back.
      ...outage,
      resumeAfterStoreOutage: true,
      ...(template !== undefined ? { serveSubmit: { template } } : {}),
      log,
      tools,
      ...inspectOptions(inspector)
    })
    const what = template === undefined ? 'child runs and control requests' : 'child runs, submitted runs and control requests'
    log(maskUrlCredentials(`serving ${what} from ${[nats.servers].flat().join(', ')} (store ${dbPath}, ${concurrency} at a time)`))
    await new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve())
      process.once('SIGTERM', () => resolve())
    })
    log('stopping; runs in progress stay resumable and their requests go back to the queue')
    await av.close()
  } finally {
    await inspector?.stop()
  }
  return 0
}

/**
 * The task of `--submit-template`, validated like any task file: a template that is not a valid
 * task, or asks for a sandbox this host cannot give, is a usage error before the worker serves.
 */
const submitTemplate = async (file: string): Promise<TaskContract> => {
  const loaded = await Effect.runPromise(Effect.either(loadTaskFile(file)))
  if (Either.isLeft(loaded)) throw new UsageError(`--submit-template: ${file}: ${loaded.left.message}`)
  const unconfinable = await sandboxUnavailable(loaded.right.sandbox)
  if (unconfinable !== undefined) throw new UsageError(`--submit-template: sandbox.exec: ${unconfinable}`)
  return loaded.right
}

/** The tools of `--tools` (paths relative to the current folder), or a usage error naming the module. */
const workerTools = async (list: string): Promise<ReadonlyArray<CallableTool>> => {
  const paths = list
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '')
  if (paths.length === 0) throw new UsageError('--tools needs one or more tool modules, separated by commas')
  const loaded = await Effect.runPromise(Effect.either(loadToolModules(paths, process.cwd())))
  if (Either.isLeft(loaded)) throw new UsageError(loaded.left.message.replace(/^toolModules\.\d+/, '--tools'))
  return loaded.right
}
