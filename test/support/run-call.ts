import { Effect, Either } from 'effect'

/**
 * Runs a store call (or any Effect) to a promise, as the tests await one: it resolves with the
 * call's value and rejects with the call's own error (a `StoreError`, a `LeaseLostError`), not
 * the `FiberFailure` that `Effect.runPromise` rejects with. It starts at once, as the call would.
 */
export const runCall = <A, E>(call: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromise(Effect.either(call)).then((result) => (Either.isLeft(result) ? Promise.reject(result.left) : result.right))
