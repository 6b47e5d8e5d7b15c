import { Agentvisor, loadRecording, type Recording, type ReplayReport, replayRecording, runPromise } from '@agentvisor/actors'
import { isFinalStatus, listRuns, RunStatus } from '@agentvisor/store'
import { Effect, Either } from 'effect'
import { openCliReader } from '../open-store.js'
import { printJson, say } from '../output.js'
import { terminalSafe } from '../terminal-text.js'
import { ExitCode, parseCommandArgs, UsageError } from '../usage-error.js'
import { loadContract } from './run.js'

const ENDED = Object.values(RunStatus).filter(isFinalStatus)

/**
 * `agentvisor replay RUN|--all [--status S] [--task FILE] [--workspace DIR] [--keep] [--json] [--db PATH]`:
 * re-drives stored runs against their recorded answers with today's code, policy and tools and
 * reports the first departure of each (docs/replay.md). Exit 0 when none departs, 1 otherwise.
 */
export const replayCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    argv,
    {
      all: { type: 'boolean' },
      status: { type: 'string' },
      task: { type: 'string' },
      workspace: { type: 'string' },
      keep: { type: 'boolean' },
      json: { type: 'boolean' },
      db: { type: 'string' }
    },
    { min: 0, max: 1, names: 'RUN (the run to replay), or --all' }
  )
  const all = values.all === true
  if (all === (positionals.length === 1)) throw new UsageError(all ? 'give a RUN or --all, not both' : 'missing RUN (the run to replay), or --all')
  if (values.status !== undefined && !all) throw new UsageError('--status goes with --all')
  if (values.status !== undefined && !ENDED.includes(values.status as RunStatus))
    throw new UsageError(`--status must be one of ${ENDED.join(', ')} (got "${values.status}"): replay replays ended runs`)
  if (values.workspace !== undefined && all) throw new UsageError('--workspace goes with one RUN: each run of --all starts from its own workspace')
  // Today's task file, validated as `run` does: its policy, tools and checks replace the stored ones.
  const task = values.task === undefined ? undefined : await loadContract(values.task)
  const recordings = await loadRecordings(values.db, all ? { status: values.status as RunStatus | undefined } : { runId: positionals[0]! })
  const options = { task, workspace: values.workspace, keep: values.keep === true }
  const reports: ReplayReport[] = []
  for (const recording of recordings) {
    const report = await replayRecording(recording, (scratch) => Agentvisor.open(scratch), options)
    reports.push(report)
    say(describe(report))
  }
  const departed = reports.filter((r) => !r.identical)
  if (all) {
    say(
      `agentvisor: ${reports.length} run${reports.length === 1 ? '' : 's'} replayed, ${reports.length - departed.length} identical, ${departed.length} departed`
    )
    if (values.json === true) printJson({ replayed: reports.length, identical: reports.length - departed.length, departed: departed.length, runs: reports })
  } else if (values.json === true) {
    printJson(reports[0])
  }
  return departed.length === 0 ? ExitCode.succeeded : ExitCode.failed
}

/** The recordings to replay, read from the store opened read-only (the original is never written). */
const loadRecordings = async (db: string | undefined, which: { readonly runId?: string; readonly status?: RunStatus | undefined }): Promise<Recording[]> => {
  const store = await openCliReader(db)
  try {
    const ids =
      which.runId !== undefined
        ? [which.runId]
        : (await runPromise(listRuns(store.db, which.status === undefined ? {} : { status: which.status })))
            .filter((row) => isFinalStatus(row.status))
            // Oldest first: a regression run reads in the order the runs were made.
            .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0))
            .map((row) => row.id)
    const recordings: Recording[] = []
    for (const id of ids) {
      const loaded = await Effect.runPromise(Effect.either(loadRecording(store.db, id)))
      // The tagged error itself: main prints it as one line (exit 2).
      if (Either.isLeft(loaded)) throw loaded.left
      recordings.push(loaded.right)
    }
    return recordings
  } finally {
    await store.close()
  }
}

/** One line per replayed run. */
const describe = (report: ReplayReport): string => {
  const steps = `${report.steps.replayed} of ${report.steps.recorded} step${report.steps.recorded === 1 ? '' : 's'}`
  const head = `agentvisor: run ${report.runId}`
  const kept = report.scratch === undefined ? '' : ` (kept: ${report.scratch.db}, ${report.scratch.workspace})`
  if (report.departure !== undefined) return terminalSafe(`${head} departs from its record at ${report.departure.message}${kept}`)
  const partial = report.notCompared === undefined ? '' : `; not compared: ${report.notCompared}`
  return terminalSafe(`${head} replays identically (${steps}, ${report.recorded.status})${partial}${kept}`)
}
