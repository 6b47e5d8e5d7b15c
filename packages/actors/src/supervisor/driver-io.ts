import { LeaseLostError, StoreError } from '@agentvisor/store'
import { Clock, Effect } from 'effect'

/** A store call as an Effect; a fenced-out write keeps its own error so the driver knows to stop. */
export const store = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, StoreError | LeaseLostError> =>
  Effect.tryPromise({
    try: run,
    catch: (cause) =>
      cause instanceof LeaseLostError
        ? cause
        : new StoreError({ message: `store: ${what} failed: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
  })

/** Time comes from Effect's Clock, so tests can move it (Retry-After, deadlines) without sleeping. */
export const nowMs = Clock.currentTimeMillis
export const iso = (ms: number): string => new Date(ms).toISOString()

