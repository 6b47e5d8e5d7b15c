import { Cause, Effect, Exit } from 'effect'

/**
 * Runs an Effect to a promise for code that awaits (an async reader, a promise API): it resolves
 * with the value and rejects with the Effect's own error (a `StoreError`, a `RunNotFoundError`...),
 * not Effect's FiberFailure wrapper, so callers can `instanceof` it and read its `_tag`.
 */
export const runPromise = async <A, E>(effect: Effect.Effect<A, E>): Promise<A> => {
  const exit = await Effect.runPromiseExit(effect)
  if (Exit.isSuccess(exit)) return exit.value
  throw Cause.squash(exit.cause)
}
