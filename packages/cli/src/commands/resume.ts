import { Agentvisor, type RunResult, runPromise } from '@agentvisor/actors'
import { getRunRow, isFinalStatus, isInterrupted, listRuns, openStore } from '@agentvisor/store'
import { openCliReader } from '../open-store.js'
import { printJson, say } from '../output.js'
import { progressObserver } from '../progress.js'
import { inspectOptions, startInspector, withInspectDefault } from '../stately-inspect.js'
import { ExitCode, parseCommandArgs, UsageError } from '../usage-error.js'
import { type DriveFlags, driveOne, openOptions } from './run.js'

/** `agentvisor resume RUN [--json] [--db PATH] [--nats URL] [--inspect [URL]]` or `agentvisor resume --all [...the same flags]` */
export const resumeCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    withInspectDefault(argv),
    { json: { type: 'boolean' }, db: { type: 'string' }, all: { type: 'boolean' }, nats: { type: 'string' }, inspect: { type: 'string' } },
    { min: 0, max: 1, names: 'RUN (the id of the run to resume), or --all' }
  )
  if ((values.all === true) === (positionals.length === 1)) throw new UsageError('resume takes a run id or --all')
  const flags = { db: values.db, nats: values.nats, json: values.json === true, inspect: values.inspect, existing: true }
  if (values.all === true) return resumeAll(flags)
  const runId = positionals[0]!
  const ended = await endedStatus(flags.db, runId)
  return driveOne(flags, async (av) => {
    const run = await av.resume(runId)
    // A finished run is not driven again: its end is reported as it was, with its exit code.
    say(
      ended === undefined
        ? `agentvisor: resuming run ${run.runId}`
        : `agentvisor: run ${run.runId} has ended (${ended}): there is nothing to resume (agentvisor send ${run.runId} TEXT continues it with a new turn)`
    )
    return run
  })
}

/** Resumes every interrupted run (status `running`, nobody driving it) side by side. */
const resumeAll = async (flags: DriveFlags): Promise<number> => {
  const startedAt = Date.now()
  const { dbPath, options } = openOptions(flags)
  const store = await openStore(dbPath)
  let ids: string[]
  try {
    const now = Date.now()
    ids = (await runPromise(listRuns(store.db, { status: 'running' }))).filter((run) => isInterrupted(run, now)).map((run) => run.id)
  } finally {
    await store.close()
  }
  say(`agentvisor: ${ids.length} interrupted run${ids.length === 1 ? '' : 's'} to resume`)
  const inspector = await startInspector(flags.inspect)
  const results: RunResult[] = []
  try {
    const av = await Agentvisor.open({ ...options, observers: [progressObserver(startedAt)], ...inspectOptions(inspector) })
    try {
      const runs = await Promise.all(ids.map((id) => av.resume(id)))
      const cancelAll = () => void Promise.all(runs.map((r) => r.cancel()))
      process.once('SIGINT', cancelAll)
      process.once('SIGTERM', cancelAll)
      try {
        results.push(...(await Promise.all(runs.map((r) => r.result))))
      } finally {
        process.off('SIGINT', cancelAll)
        process.off('SIGTERM', cancelAll)
      }
    } finally {
      await av.close()
    }
  } finally {
    await inspector?.stop()
  }
  for (const result of results) say(`agentvisor: run ${result.runId} ${result.status}`)
  if (flags.json) printJson(results)
  if (results.every((r) => r.status === 'succeeded')) return ExitCode.succeeded
  const paused = (status: string): boolean => status === 'awaiting_approval' || status === 'awaiting_input'
  return results.some((r) => paused(r.status)) && results.every((r) => r.status === 'succeeded' || paused(r.status)) ? ExitCode.paused : ExitCode.failed
}

/** The status of a run that has ended, or undefined (not ended, or not there: `resume` says which). */
const endedStatus = async (db: string | undefined, runId: string): Promise<string | undefined> => {
  const store = await openCliReader(db)
  try {
    const row = await runPromise(getRunRow(store.db, runId))
    return row !== undefined && isFinalStatus(row.status) ? row.status : undefined
  } finally {
    await store.close()
  }
}
