import { LeaseLostError } from '@agentvisor/store'
import { Effect } from 'effect'
import type { LeaseEvents } from './lease-keeper.js'

/** Why a drive was stopped from outside. */
export type StopReason = 'cancel' | 'timeout'

/** Longest delay a Node timer takes (about 24.8 days); longer ones are re-armed. */
const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * Everything that can stop one run's drive from outside, in one place: a local cancel, a cancel
 * requested through the store (the lease keeper), a takeover of the lease, the run's deadline.
 * A drive races one `wait` instead of a fiber per cause, which is most of what an idle run
 * costs in memory.
 */
export const makeStopSignal = (runId: string) => {
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

  /** Waits until something stops the drive; interrupting the wait disarms the deadline. */
  const wait: Effect.Effect<StopReason, LeaseLostError> = Effect.async((resume) => {
    if (fired !== undefined) return resume(fired)
    listener = resume
    return Effect.sync(() => {
      listener = undefined
      if (timer !== undefined) clearTimeout(timer)
    })
  })

  return {
    runId,
    /** A cancel from this process (the run handle, SIGINT). */
    cancel: (): void => fire(Effect.succeed('cancel')),
    arm,
    leaseEvents,
    wait,
    /** Disarms the deadline once the drive is over. */
    dispose: (): void => {
      if (timer !== undefined) clearTimeout(timer)
    }
  }
}

export type StopSignal = ReturnType<typeof makeStopSignal>

export { LeaseLostError }
