import { Agentvisor, invalidNatsServers, natsBusOptionsFromEnv, type RunResult, type StartedRun, runPromise } from '@agentvisor/actors'
import { ApprovalMode, loadTaskFile, type TaskContract, unsetApiKeys, quoteName } from '@agentvisor/core'
import { listApprovals, openStore, resolveDbPath } from '@agentvisor/store'
import { Effect, Either, Schema } from 'effect'
import { describeUsage, elapsed, printJson, say } from '../output.js'
import { progressObserver } from '../progress.js'
import { inspectOptions, startInspector, withInspectDefault } from '../stately-inspect.js'
import { terminalApprover } from '../terminal-approver.js'
import { storeOutageOption } from '../store-outage.js'
import { ExitCode, parseCommandArgs, UsageError } from '../usage-error.js'
import { existingStorePath } from '../store-path.js'

const isApprovalMode = Schema.is(ApprovalMode)

/** The exit code a run's status means (docs/cli.md, "Exit codes"). */
export const exitCodeOf = (status: RunResult['status']): ExitCode => {
  if (status === 'succeeded') return ExitCode.succeeded
  if (status === 'awaiting_approval' || status === 'awaiting_input') return ExitCode.paused
  return ExitCode.failed
}

/**
 * Prints how a run ended: a line on stderr (with what to do next when it waits for approval),
 * and the `--json` object on stdout.
 */
export const reportResult = async (result: RunResult, json: boolean, startedAt: number, dbPath: string): Promise<void> => {
  const error = result.error === undefined ? '' : `: ${result.error.kind}: ${result.error.message}`
  // Still `running` in the store once the drive stopped: interrupted (a failing store, a takeover).
  const shown = result.status === 'running' ? 'interrupted' : result.status
  say(`agentvisor: run ${result.runId} ${shown} after ${result.steps} step${result.steps === 1 ? '' : 's'} (${elapsed(startedAt)})${error}`)
  const usage = result.treeUsage ?? result.usage
  if (usage !== undefined && usage.inputTokens + usage.outputTokens > 0)
    say(`agentvisor: ${result.treeUsage !== undefined ? 'the run tree used' : 'used'} ${describeUsage(usage)}`)
  if (result.status === 'awaiting_approval' || result.status === 'awaiting_input') await reportPending(result.runId, dbPath)
  if (json) printJson(result)
}

const reportPending = async (runId: string, dbPath: string): Promise<void> => {
  const store = await openStore(dbPath)
  try {
    const all = (await runPromise(listApprovals(store.db, runId))).filter((a) => a.status === 'pending')
    const questions = all.filter((a) => a.kind === 'input')
    for (const question of questions) say(`agentvisor: the model asks: ${question.target}  [${question.id}]`)
    if (questions.length > 0) {
      say(`answer with: agentvisor answer ${runId}${questions.length > 1 ? ' REQUEST' : ''} "..."`)
      say(`then continue with: agentvisor resume ${runId}`)
      return
    }
    const pending = all
    say(`agentvisor: waiting for ${pending.length === 1 ? 'a decision' : `${pending.length} decisions`}:`)
    for (const request of pending) {
      const why =
        request.kind === 'recovery'
          ? 'interrupted after it started: it may or may not have run'
          : `rule ${quoteName(request.rule)} in layer ${quoteName(request.layer)}`
      say(`  ${request.act} ${request.target}  (${why})  [${request.id}]`)
    }
    if (pending.some((r) => r.kind === 'recovery')) say(`settle with: agentvisor approve ${runId} --retry | --completed "what happened" | --abort`)
    if (pending.some((r) => r.kind !== 'recovery')) say(`decide with: agentvisor approve ${runId} [REQUEST] [--deny] [--remember] [--edit JSON]`)
    say(`then continue with: agentvisor resume ${runId}`)
  } finally {
    await store.close()
  }
}

/**
 * Waits for a started run, turning SIGINT/SIGTERM into a clean cancel (the run ends
 * `cancelled`, its tool processes killed); a second signal leaves at once.
 */
export const awaitWithSignals = async (run: StartedRun): Promise<RunResult> => {
  let signalled = false
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled) process.exit(130)
    signalled = true
    say(`agentvisor: ${signal} received, cancelling run ${run.runId}`)
    void run.cancel()
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  try {
    return await run.result
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
}

/**
 * A key the task's providers need and this environment lacks is said before any run exists
 * (docs/task-file.md, "API keys"): exit 2 naming the variable of the chain's first provider, a
 * warning for a later one's (only a run falling over to it would fail). Another agent's chain is checked too when its runs are
 * driven here; with NATS, workers have their own environment, so it is only a warning.
 */
const checkApiKeys = (contract: TaskContract, onWorkers: boolean): void => {
  const own = unsetApiKeys(contract.providers, process.env)
  if (own.refused !== undefined) throw new UsageError(own.refused)
  const warnings = [...own.warnings]
  for (const [name, agent] of Object.entries(contract.agents ?? {})) {
    if (agent.providers === undefined) continue
    const theirs = unsetApiKeys(agent.providers, process.env, `agents.${name}.providers`)
    if (theirs.refused !== undefined && !onWorkers) throw new UsageError(theirs.refused)
    warnings.push(
      ...theirs.warnings,
      ...(theirs.refused === undefined ? [] : [`${theirs.refused.split(': set it')[0]}; a worker that runs ${quoteName(name)} needs it`])
    )
  }
  for (const warning of warnings) say(`agentvisor: warning: ${warning}`)
}

/** A task file validated, or a `UsageError` naming the file and the field (exit 2). */
export const loadContract = async (file: string): Promise<TaskContract> => {
  const loaded = await Effect.runPromise(Effect.either(loadTaskFile(file)))
  if (Either.isLeft(loaded)) throw new UsageError(`${file}: ${loaded.left.message}`)
  return loaded.right
}

/** `agentvisor run TASK [--json] [--db PATH] [--approval prompt|defer|auto] [--nats URL] [--inspect [URL]]` */
export const runCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    withInspectDefault(argv),
    {
      json: { type: 'boolean' },
      db: { type: 'string' },
      approval: { type: 'string' },
      nats: { type: 'string' },
      inspect: { type: 'string' }
    },
    { min: 1, max: 1, names: 'TASK (the task file to run)' }
  )
  if (values.approval !== undefined && !isApprovalMode(values.approval)) {
    throw new UsageError(`--approval must be prompt, defer or auto (got "${values.approval}")`)
  }
  const loaded = await loadContract(positionals[0]!)
  const contract: TaskContract = values.approval === undefined ? loaded : { ...loaded, approval: values.approval }
  checkApiKeys(contract, values.nats !== undefined || process.env['AGENTVISOR_NATS_URL'] !== undefined)
  return driveOne({ db: values.db, nats: values.nats, json: values.json === true, inspect: values.inspect }, async (av) => {
    const run = await av.start(contract)
    say(`agentvisor: run ${run.runId} started: ${contract.goal}`)
    return run
  })
}

/** What `run` and `resume` share: how the store and the bus are chosen. */
export interface DriveFlags {
  readonly db: string | undefined
  readonly nats: string | undefined
  readonly json: boolean
  /** The Stately inspector relay to stream XState inspection events to (`--inspect`). */
  readonly inspect?: string | undefined
  /** The command is about runs the store has (`resume`, `send`): a missing store is exit 2. */
  readonly existing?: boolean | undefined
}

/** The store path and the Agentvisor options (the NATS bus, when asked for) of the flags. */
export const openOptions = (flags: Pick<DriveFlags, 'db' | 'nats' | 'existing'>) => {
  // `resume` and `send` are about runs a store has: a store that is not there is a mistake to say.
  const dbPath = flags.existing === true ? existingStorePath(flags.db) : resolveDbPath(flags.db)
  // With NATS, children go to the workers' queue; without it, this process drives them.
  const nats = natsBusOptionsFromEnv(flags.nats === undefined ? {} : { nats: flags.nats })
  const badServer = nats === undefined ? undefined : invalidNatsServers(nats.servers)
  if (badServer !== undefined) throw new UsageError(`--nats: ${badServer}`)
  return { dbPath, options: { db: dbPath, ...(nats === undefined ? {} : { nats }), ...storeOutageOption() } }
}

/**
 * Drives one run started (or resumed) by `begin` to its end or pause, with progress on stderr,
 * terminal approvals when there is a TTY, signals turned into a cancel, and the exit code.
 */
export const driveOne = async (flags: DriveFlags, begin: (av: Agentvisor) => Promise<StartedRun>): Promise<number> => {
  const startedAt = Date.now()
  const approver = terminalApprover()
  const { dbPath, options } = openOptions(flags)
  const inspector = await startInspector(flags.inspect)
  try {
    const av = await Agentvisor.open({
      ...options,
      observers: [progressObserver(startedAt)],
      ...(approver === undefined ? {} : { approver }),
      ...inspectOptions(inspector)
    })
    try {
      const run = await begin(av)
      const result = await awaitWithSignals(run)
      await av.close()
      await reportResult(result, flags.json, startedAt, dbPath)
      return exitCodeOf(result.status)
    } finally {
      await av.close()
    }
  } finally {
    // Its socket would keep the process alive once the run is over.
    await inspector?.stop()
  }
}
