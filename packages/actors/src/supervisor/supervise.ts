import type { RootHandle, SecretSet } from '@agentvisor/core'
import { closeOpenRequests, type Database, isStoreOutage, LeaseLostError, type RunWriter, StoreError } from '@agentvisor/store'
import type { Kysely } from 'kysely'
import { Cause, Clock, Effect, Fiber } from 'effect'
import type { Actor } from 'xstate'
import { oneLine } from '../loop/one-line.js'
import type { runMachine } from '../machine/run-machine.js'
import { statusOfState } from '../machine/run-state.js'
import { dropLease } from './lease.js'
import type { LeaseKeeper } from './lease-keeper.js'
import type { RunHandle, RunResult } from './run-handle.js'
import type { RunDriver } from '../driver/run-driver.js'
import { treeUsageOf } from '../driver/run-usage.js'
import { notify, type RunObserver } from '../driver/run-observer.js'
import type { StopSignal } from './stop-signal.js'

/** What supervising a run needs from its supervisor: the same for every run it drives. */
export interface SuperviseDeps {
  readonly writer: RunWriter
  readonly db: Kysely<Database>
  readonly leases: LeaseKeeper
  readonly secrets: SecretSet
  readonly warn: (line: string) => void
  /** Called once a run's fiber has let go of it (its lease dropped), however it ended. */
  readonly ended: () => void
  /**
   * What becomes of a run a store outage interrupted, once its fiber let go of it: resumed here
   * when the store is back (`resumeAfterStoreOutage`, a worker), its result the resumed drive's.
   * Without it the interrupted result stands.
   */
  readonly afterStoreOutage?: ((runId: string, interrupted: RunResult) => Effect.Effect<RunResult>) | undefined
}

/** One run as `supervise` drives it: its driver and actor, and how it may stop. */
export interface Supervised {
  readonly runId: string
  readonly driver: RunDriver
  readonly actor: Actor<typeof runMachine>
  readonly deadline: number
  readonly stop: StopSignal
  readonly observers: ReadonlyArray<RunObserver>
  readonly leaseToken: number
  readonly cancelRequested: boolean
  /** Created by this very call: nothing of it can have been left in flight, so nothing to recover. */
  readonly fresh: boolean
  /** The run's workspace root: held from the fiber's start until it lets go (docs/task-file.md). */
  readonly rootHandle: RootHandle
  /** A new turn to begin before driving (a finished run sent a follow-up). */
  readonly followUp?: { readonly text: string; readonly at: number } | undefined
}

/** Why a drive stopped without its run ending: another driver took it over, or the store failed. */
type LetGo = { readonly kind: 'lost' } | { readonly kind: 'store'; readonly error: StoreError }

/**
 * Runs one driver to its end under the run's deadline, its cancel signal (local or written
 * to the store by another process) and its lease: losing the lease stops it at once.
 */
export const makeSupervise =
  (deps: SuperviseDeps) =>
  (run: Supervised): Effect.Effect<RunResult> => {
    const { writer, leases, secrets, warn, ended } = deps
    const { runId, driver, actor, deadline, stop, observers, leaseToken, cancelRequested, fresh, rootHandle, followUp } = run
    let stoppedBy: LetGo | undefined
    const unwatch = leases.watch(runId, leaseToken, stop.leaseEvents)
    const drive = Effect.gen(function* () {
      // Held here, inside the `ensuring` below, not at launch: a fiber interrupted before it
      // starts never holds it, and one that started always lets go of it.
      rootHandle.hold()
      // A run cancelled while nobody drove it (paused, or interrupted) just ends. A cancel
      // that comes later reaches the driver through the lease keeper.
      if (cancelRequested) {
        yield* writer.settlePending(runId, leaseToken, 'unknown', new Date().toISOString())
        yield* driver.commit({ event: { type: 'CANCEL' } })
        yield* driver.cancelChildren
        return
      }
      if (!fresh) yield* driver.recover
      if (followUp !== undefined) yield* driver.followUp(followUp.text, followUp.at)
      stop.arm(deadline - (yield* Clock.currentTimeMillis))
      const stopped = yield* stop.race(driver.drive, driver.afterInterrupt)
      // By now the drive fiber is interrupted and its finalizers (tool process groups,
      // in-flight provider calls) have run: the final transition is the last thing written.
      if (stopped === 'cancel') yield* driver.commit({ event: { type: 'CANCEL' } })
      if (stopped === 'timeout') yield* driver.commit({ event: { type: 'TIMEOUT' } })
      // A cancelled or timed-out parent takes its children with it.
      if (stopped !== 'settled') yield* driver.cancelChildren
    })
    /** A lost lease or a failing store lets the run go as it is; anything else fails it. */
    const letGoFor = (error: unknown): LetGo | undefined =>
      error instanceof LeaseLostError ? { kind: 'lost' } : error instanceof StoreError ? { kind: 'store', error } : undefined
    const failed = (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
      for (const error of Cause.failures(cause)) stoppedBy ??= letGoFor(error)
      if (stoppedBy !== undefined) return Effect.void
      return driver
        .commit({ event: { type: 'FAIL', error: { kind: 'internal', message: secrets.redact(internalMessage(cause)) } } })
        .pipe(Effect.catchAll((error) => Effect.sync(() => (stoppedBy = letGoFor(error)))))
    }
    const finished = Effect.suspend(() => {
      const result = resultOf(runId, driver, stoppedBy)
      // A run that ended with requests open (a parent's timeout cancelled it while it waited)
      // leaves none behind: they are closed (docs/policy.md). Only the ends that can leave one.
      const closing =
        stoppedBy === undefined && (result.status === 'cancelled' || result.status === 'timed_out' || result.status === 'failed')
          ? closeOpenRequests(deps.db, runId, new Date().toISOString()).pipe(
              Effect.catchAll((error) => Effect.sync(() => warn(`run ${runId}: cannot close its open requests: ${oneLine(error.message)}`)))
            )
          : Effect.void
      return Effect.zipRight(
        closing,
        Effect.suspend(() => finishedWith(result))
      )
    })
    const finishedWith = (result: RunResult): Effect.Effect<RunResult> => {
      // A run that started children reports its tree's usage too, summed from the store.
      const tree = stoppedBy === undefined && driver.context().spawnedChildren ? treeUsageOf(deps.db, runId) : undefined
      return Effect.map(tree === undefined ? Effect.succeed(undefined) : Effect.option(tree), (treeUsage) => {
        // In the documented key order: `treeUsage` after `usage`, before `error` (docs/cli.md, `--json`).
        const { error, ...rest } = result
        const full: RunResult =
          treeUsage !== undefined && treeUsage._tag === 'Some' ? { ...rest, treeUsage: treeUsage.value, ...(error !== undefined ? { error } : {}) } : result
        notify(observers, 'onFinished', full, warn)
        return full
      })
    }
    const letGo = Effect.ensuring(
      Effect.suspend(() => {
        rootHandle.release()
        unwatch()
        stop.dispose()
        actor.stop()
        // The run's usage goes into its row with the release (docs/task-file.md, "Usage and budgets").
        return dropLease(writer, runId, leaseToken, stoppedBy === undefined ? JSON.stringify(driver.usage()) : undefined)
      }),
      Effect.sync(ended)
    )
    // Few combinators on purpose: each one is a frame every idle run keeps on its fiber's stack.
    const supervised = Effect.ensuring(Effect.zipRight(Effect.catchAllCause(drive, failed), finished), letGo)
    const { afterStoreOutage } = deps
    // Only a process that resumes after an outage pays the frame.
    if (afterStoreOutage === undefined) return supervised
    return Effect.flatMap(supervised, (result) =>
      stoppedBy?.kind === 'store' && isStoreOutage(stoppedBy.error) ? afterStoreOutage(runId, result) : Effect.succeed(result)
    )
  }

/** The handle of a run driven here by `fiber`, cancelled through its stop signal. */
export const handleOf = (runId: string, fiber: NonNullable<RunHandle['fiber']>, stop: StopSignal): RunHandle => ({
  runId,
  // Built when awaited: whoever holds the handle of an idle run does not hold a join too.
  result: Effect.suspend(() => Fiber.join(fiber)),
  cancel: Effect.sync(stop.cancel),
  fiber
})

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

const internalMessage = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return oneLine(error instanceof Error ? error.message : String(error))
}
