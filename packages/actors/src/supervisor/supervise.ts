import type { RootHandle, SecretSet } from '@agentvisor/core'
import { type Database, isStoreOutage, LeaseLostError, type RunWriter, StoreError } from '@agentvisor/store'
import type { Kysely } from 'kysely'
import { Cause, Clock, Effect, Fiber } from 'effect'
import type { Actor } from 'xstate'
import { oneLine } from '../loop/one-line.js'
import type { runMachine } from '../machine/run-machine.js'
import { dropLease } from './lease.js'
import type { LeaseKeeper } from './lease-keeper.js'
import type { RunHandle, RunResult } from './run-handle.js'
import { finishedRun, type LetGo } from './run-result.js'
import type { RunDriver } from '../driver/run-driver.js'
import type { RunObserver } from '../driver/run-observer.js'
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

/**
 * Runs one driver to its end under the run's deadline, its cancel signal (local or written
 * to the store by another process) and its lease: losing the lease stops it at once.
 */
export const makeSupervise =
  (deps: SuperviseDeps) =>
  (run: Supervised): Effect.Effect<RunResult> => {
    const { writer, leases, secrets, ended } = deps
    const { runId, driver, actor, deadline, stop, leaseToken, cancelRequested, fresh, rootHandle, followUp } = run
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
    const finished = Effect.suspend(() => finishedRun(deps, run, stoppedBy))
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

const internalMessage = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return oneLine(error instanceof Error ? error.message : String(error))
}
