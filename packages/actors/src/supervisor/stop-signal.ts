import type { LeaseLostError } from '@agentvisor/store'
import { Effect, type Exit, Fiber } from 'effect'
import type { LeaseEvents } from './lease-keeper.js'

/** Why a drive was stopped from outside. */
export type StopReason = 'cancel' | 'timeout'

/** Longest delay a Node timer takes (about 24.8 days); longer ones are re-armed. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** What stops one run's drive from outside, as its supervision holds it (supervise.ts). */
export interface StopSignal {
  readonly runId: string
  /** A cancel from this process (the run handle, SIGINT). */
  readonly cancel: () => void
  /** Fires `timeout` after `ms` (from now), however long that is. */
  readonly arm: (ms: number) => void
  /** What the lease keeper tells this run: a cancel requested through the store, a lost lease. */
  readonly leaseEvents: LeaseEvents
  /**
   * Runs `drive` in a fiber of its own until it ends (`settled`) or something stops it: then the
   * drive is interrupted, its finalizers have run and so has `afterInterrupt`, before the reason
   * is returned.
   */
  readonly race: <E>(drive: Effect.Effect<void, E>, afterInterrupt: Effect.Effect<void>) => Effect.Effect<'settled' | StopReason, E | LeaseLostError>
  /** Disarms the deadline once the drive is over. */
  readonly dispose: () => void
}

/**
 * Everything that can stop one run's drive from outside, in one place: a local cancel, a cancel
 * requested through the store (the lease keeper), a takeover of the lease, the run's deadline.
 * The drive runs in one fiber watched by `race`, instead of a fiber per cause (or Effect's
 * `raceFirst`, a fiber for each side): fibers are most of what an idle run costs in memory.
 */
export const makeStopSignal = (runId: string): StopSignal => {
  let fired: Effect.Effect<StopReason, LeaseLostError> | undefined
  let listener: ((outcome: Effect.Effect<StopReason, LeaseLostError>) => void) | undefined
  let timer: NodeJS.Timeout | undefined

  const fire = (outcome: Effect.Effect<StopReason, LeaseLostError>): void => {
    if (fired !== undefined) return
    fired = outcome
    if (timer !== undefined) clearTimeout(timer)
    listener?.(outcome)
  }

  /** Fires `timeout` after `ms` (from now), however long that is. */
  const arm = (ms: number): void => {
    if (fired !== undefined) return
    if (timer !== undefined) clearTimeout(timer)
    const delay = Math.max(0, ms)
    const start = Date.now()
    timer = setTimeout(() => (delay > MAX_TIMER_MS ? arm(delay - (Date.now() - start)) : fire(Effect.succeed('timeout'))), Math.min(delay, MAX_TIMER_MS))
  }

  const leaseEvents: LeaseEvents = {
    onCancelRequested: () => fire(Effect.succeed('cancel')),
    onLost: (error) => fire(Effect.fail(error))
  }

  /**
   * Runs `drive` in a fiber of its own until it ends (`settled`) or something stops it: then the
   * drive is interrupted, its finalizers (tool process groups, in-flight provider calls) have run
   * and so has `afterInterrupt`, before the reason is returned. Interrupting the race interrupts
   * the drive the same way and disarms the deadline.
   */
  const race = <E>(drive: Effect.Effect<void, E>, afterInterrupt: Effect.Effect<void>): Effect.Effect<'settled' | StopReason, E | LeaseLostError> =>
    Effect.flatMap(Effect.fork(drive), (fiber) =>
      Effect.async<'settled' | StopReason, E | LeaseLostError>((resume) => {
        const settled = (exit: Exit.Exit<void, E>): void => {
          listener = undefined
          if (timer !== undefined) clearTimeout(timer)
          resume(Effect.as(exit, 'settled' as const))
        }
        const stopped = (outcome: Effect.Effect<StopReason, LeaseLostError>): void => {
          listener = undefined
          fiber.removeObserver(settled)
          resume(Effect.zipRight(Effect.uninterruptible(Effect.zipRight(Fiber.interrupt(fiber), afterInterrupt)), outcome))
        }
        if (fired !== undefined) return stopped(fired)
        listener = stopped
        fiber.addObserver(settled)
        return Effect.suspend(() => {
          listener = undefined
          fiber.removeObserver(settled)
          if (timer !== undefined) clearTimeout(timer)
          return Effect.zipRight(Fiber.interrupt(fiber), afterInterrupt)
        })
      })
    )

  return {
    runId,
    cancel: (): void => fire(Effect.succeed('cancel')),
    arm,
    leaseEvents,
    race,
    dispose: (): void => {
      if (timer !== undefined) clearTimeout(timer)
    }
  }
}
