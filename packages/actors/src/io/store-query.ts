import { StoreError } from '@agentvisor/store'
import { Effect } from 'effect'

/** A store read or write of a use case as an Effect that fails typed: `StoreError`. */
export const query = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, StoreError> =>
  Effect.tryPromise({
    try: run,
    catch: (cause): StoreError => {
      if (cause instanceof StoreError) return cause
      return new StoreError({ message: `store: ${what} failed: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
    }
  })
