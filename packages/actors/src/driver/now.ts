import { Effect, Exit } from 'effect'

/**
 * A result had at once (a plain value) or after a wait (an Effect). The driver's hot path stays
 * synchronous while nothing waits: entry work that can answer at once returns its value, and only
 * a real wait (a provider call in flight, a tool's I/O, an async store) goes through Effect
 * (docs/architecture.md, "The hot path"). A settled `Exit` counts as "at once" when it succeeded.
 */
export type Now<A, E = never> = A | Effect.Effect<A, E>

/** `x` as an Effect (the slow path, and what tests compose). */
export const later = <A, E>(x: Now<A, E>): Effect.Effect<A, E> => (Effect.isEffect(x) ? (x as Effect.Effect<A, E>) : Effect.succeed(x))

/** `f` of `x`'s value: called at once when `x` is a value or a succeeded Exit, else after it. */
export const thenNow = <A, E, B, E2>(x: Now<A, E>, f: (a: A) => Now<B, E2>): Now<B, E | E2> => {
  if (!Effect.isEffect(x)) return f(x as A)
  const effect = x as Effect.Effect<A, E>
  if (Exit.isExit(effect) && Exit.isSuccess(effect)) return f((effect as Exit.Success<A, E>).value)
  return Effect.flatMap(effect, (a) => later(f(a)))
}
