import { type Eventually, LeaseLostError, StoreError } from '@agentvisor/store'
import { Clock, Effect } from 'effect'

/**
 * A store call's failure as the driver reports it; a fenced-out write keeps its own error, and a
 * StoreError of the store's own (a corrupt row, docs/durability.md) already names what failed.
 */
export const failure = (what: string, cause: unknown): StoreError | LeaseLostError =>
  cause instanceof LeaseLostError || cause instanceof StoreError
    ? cause
    : new StoreError({ message: `store: ${what} failed: ${cause instanceof Error ? cause.message : String(cause)}`, cause })

/**
 * A store call as an Effect; a fenced-out write keeps its own error so the driver knows to stop.
 * The call may answer at once (SQLite's prepared statements) or with a promise (any dialect
 * through Kysely): an immediate answer costs no promise and no trip through the event loop.
 */
export const store = <A>(what: string, run: () => Eventually<A>): Effect.Effect<A, StoreError | LeaseLostError> =>
  Effect.suspend(() => {
    let result: Eventually<A>
    try {
      result = run()
    } catch (cause) {
      return Effect.fail(failure(what, cause))
    }
    if (!(result instanceof Promise)) return Effect.succeed(result)
    const pending = result
    return Effect.tryPromise({ try: () => pending, catch: (cause) => failure(what, cause) })
  })

/** Time comes from Effect's Clock, so tests can move it (Retry-After, deadlines) without sleeping. */
export const nowMs = Clock.currentTimeMillis
/** An ISO timestamp; a step writes several in the same millisecond, so the last one is kept. */
export const iso = (ms: number): string => {
  if (ms !== lastIsoMs) {
    lastIsoMs = ms
    lastIso = new Date(ms).toISOString()
  }
  return lastIso
}
let lastIsoMs = Number.NaN
let lastIso = ''
