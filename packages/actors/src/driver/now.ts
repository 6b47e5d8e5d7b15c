import { Clock, Effect, Exit } from 'effect'

/**
 * A result had at once (a plain value) or after a wait (an Effect). The driver's hot path stays
 * synchronous while nothing waits: entry work that can answer at once returns its value, and only
 * a real wait (a provider call in flight, a tool's I/O, an async store) goes through Effect
 * (docs/architecture.md, "The hot path"). A settled `Exit` counts as "at once" when it succeeded.
 */
export type Now<A, E = never> = A | Effect.Effect<A, E>

/** `x` as an Effect (the slow path, and what tests compose). */
export const later = <A, E>(x: Now<A, E>): Effect.Effect<A, E> => (Effect.isEffect(x) ? (x as Effect.Effect<A, E>) : Effect.succeed(x))

/** What `valueNow` answers for a result that is not had at once. */
export const LATER: unique symbol = Symbol('later')

/** `x`'s value when it is had at once (a plain value or a succeeded Exit), else `LATER`. */
export const valueNow = <A, E>(x: Now<A, E>): A | typeof LATER => {
  if (!Effect.isEffect(x)) return x as A
  const effect = x as Effect.Effect<A, E>
  return Exit.isExit(effect) && Exit.isSuccess(effect) ? (effect as Exit.Success<A, E>).value : LATER
}

/** `f` of `x`'s value: called at once when `x` is had at once, else after it. */
export const thenNow = <A, E, B, E2>(x: Now<A, E>, f: (a: A) => Now<B, E2>): Now<B, E | E2> => {
  const value = valueNow(x)
  return value === LATER ? Effect.flatMap(x as Effect.Effect<A, E>, (a) => later(f(a))) : f(value)
}

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
