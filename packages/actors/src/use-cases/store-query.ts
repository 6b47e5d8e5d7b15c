import { StoreError } from '@agentvisor/store'
import { Effect } from 'effect'

/**
 * A store read or write of a use case as an Effect that fails typed: `StoreError`, or one of
 * the tagged errors `keep` lets through (a decision that lost its race, an edit refused).
 */
export const query = <A, K = never>(what: string, run: () => Promise<A>, keep?: (cause: unknown) => cause is K): Effect.Effect<A, StoreError | K> =>
  Effect.tryPromise({
    try: run,
    catch: (cause): StoreError | K => {
      if (keep?.(cause) === true) return cause as K
      if (cause instanceof StoreError) return cause
      return new StoreError({ message: `store: ${what} failed: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
    }
  })
