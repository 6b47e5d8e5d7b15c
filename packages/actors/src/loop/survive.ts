import { maskUrlCredentials } from '@agentvisor/core'
import { Cause, Effect, Schedule } from 'effect'

/** Where a long-lived loop reports the failures it survives: one line each. */
export type LogLine = (line: string) => void

/** The default log of a loop that was given none (docs/durability.md, "What is logged"). */
export const stderrLog: LogLine = (line) => void process.stderr.write(`agentvisor: ${line}\n`)

/** A cause as one line: its first error's message, a URL in it without credentials. */
export const causeLine = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  const text = error instanceof Error ? error.message : String(error)
  const first = maskUrlCredentials(text.split('\n')[0] ?? '')
  return first.length > 300 ? `${first.slice(0, 297)}...` : first
}

/**
 * How a loop's failing step is tried again: 100 ms, doubling, never more than 5 s apart; a store
 * or a server that is back is used again within seconds, one that stays away costs a line per 5 s.
 */
export const loopRetry: Schedule.Schedule<unknown, unknown> = Schedule.exponential('100 millis').pipe(Schedule.union(Schedule.spaced('5 seconds')))

/**
 * Runs `step` until it succeeds: each failure (typed or a defect) is logged in one line naming
 * `what` and its cause, and `step` runs again on `schedule`. Only interruption ends it.
 */
export const surviving = <A, E, R>(
  what: string,
  step: Effect.Effect<A, E, R>,
  log: LogLine,
  schedule: Schedule.Schedule<unknown, unknown> = loopRetry
): Effect.Effect<A, never, R> =>
  Effect.sandbox(step).pipe(
    Effect.tapError((cause) => (Cause.isInterruptedOnly(cause) ? Effect.void : Effect.sync(() => log(`${what} failed, trying again: ${causeLine(cause)}`)))),
    Effect.retry({ schedule, while: (cause) => !Cause.isInterruptedOnly(cause) }),
    Effect.catchAll(() => Effect.interrupt)
  )
