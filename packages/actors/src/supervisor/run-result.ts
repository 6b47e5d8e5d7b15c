import { closeOpenRequests, type Database, type StoreError } from '@agentvisor/store'
import type { Kysely } from 'kysely'
import { Effect } from 'effect'
import { oneLine } from '../loop/one-line.js'
import { statusOfState } from '../machine/run-state.js'
import type { RunDriver } from '../driver/run-driver.js'
import { treeUsageOf } from '../driver/run-usage.js'
import { notify } from '../driver/run-observer.js'
import type { RunObserver } from '../driver/run-observer.js'
import type { RunResult } from './run-handle.js'

/** Why a drive stopped without its run ending: another driver took it over, or the store failed. */
export type LetGo = { readonly kind: 'lost' } | { readonly kind: 'store'; readonly error: StoreError }

/** What ending a run reads of its supervisor (supervise.ts `SuperviseDeps` is one). */
export interface EndingDeps {
  readonly db: Kysely<Database>
  readonly warn: (line: string) => void
}

/** The run that ends (supervise.ts `Supervised` is one). */
export interface EndingRun {
  readonly runId: string
  readonly driver: RunDriver
  readonly observers: ReadonlyArray<RunObserver>
}

/**
 * What a supervised run ended with, told to its observers (`onFinished`): its result as its driver
 * has it, with its tree's usage when it started children. A run that ended with requests open (a
 * parent's timeout cancelled it while it waited) leaves none behind: they are closed first
 * (docs/policy.md). A run let go of (`letGo`) is interrupted, not ended: it closes nothing.
 */
export const finishedRun = (deps: EndingDeps, run: EndingRun, letGo: LetGo | undefined): Effect.Effect<RunResult> => {
  const { runId, driver } = run
  const { warn } = deps
  const result = resultOf(runId, driver, letGo)
  // Only the ends that can leave one.
  const closing =
    letGo === undefined && (result.status === 'cancelled' || result.status === 'timed_out' || result.status === 'failed')
      ? closeOpenRequests(deps.db, runId, new Date().toISOString()).pipe(
          Effect.catchAll((error) => Effect.sync(() => warn(`run ${runId}: cannot close its open requests: ${oneLine(error.message)}`)))
        )
      : Effect.void
  return Effect.zipRight(
    closing,
    Effect.suspend(() => finishedWith(deps, run, letGo, result))
  )
}

const finishedWith = (deps: EndingDeps, run: EndingRun, letGo: LetGo | undefined, result: RunResult): Effect.Effect<RunResult> => {
  const { runId, driver } = run
  // A run that started children reports its tree's usage too, summed from the store.
  const tree = letGo === undefined && driver.context().spawnedChildren ? treeUsageOf(deps.db, runId) : undefined
  return Effect.map(tree === undefined ? Effect.succeed(undefined) : Effect.option(tree), (treeUsage) => {
    // In the documented key order: `treeUsage` after `usage`, before `error` (docs/cli.md, `--json`).
    const { error, ...rest } = result
    const full: RunResult =
      treeUsage !== undefined && treeUsage._tag === 'Some' ? { ...rest, treeUsage: treeUsage.value, ...(error !== undefined ? { error } : {}) } : result
    notify(run.observers, 'onFinished', full, deps.warn)
    return full
  })
}

const resultOf = (runId: string, driver: RunDriver, letGo: LetGo | undefined): RunResult => {
  const ctx = driver.context()
  if (letGo?.kind === 'lost') {
    // Another driver took the run over; what this one remembers is no longer the run's state.
    return {
      runId,
      status: 'running',
      steps: ctx.completedSteps,
      usage: driver.usage(),
      error: { kind: 'internal', message: `run ${runId}: this driver's lease was taken over by another driver` }
    }
  }
  if (letGo?.kind === 'store') {
    // The store refused a write (disk full, connection lost): the run is interrupted where the
    // store has it, never `failed` for a fault of the store; `resume` goes on once it is back.
    const { state, steps } = driver.durable()
    return {
      runId,
      status: statusOfState(state),
      steps,
      usage: driver.usage(),
      error: {
        kind: 'internal',
        message: `${oneLine(letGo.error.message)}; the run is interrupted in ${state} and goes on with \`agentvisor resume ${runId}\` once the store is back`
      }
    }
  }
  const status = statusOfState(driver.currentPath())
  const output = status === 'succeeded' ? driver.output() : undefined
  return {
    runId,
    status,
    steps: ctx.completedSteps,
    ...(output !== undefined ? { output } : {}),
    usage: driver.usage(),
    ...(ctx.error !== null ? { error: ctx.error } : {})
  }
}
