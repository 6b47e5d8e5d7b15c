// Deep modules, not the 'effect' barrel: the CLI's start-up pays for every module it loads.
import * as Effect from 'effect/Effect'
import * as Effectable from 'effect/Effectable'
import * as Exit from 'effect/Exit'
import { LeaseLostError, StoreError } from './errors.js'

/** A value now (SQLite's prepared statements) or later (a driver that answers by promise). */
export type Eventually<A> = A | Promise<A>

/** What a call does, as its failure names it: a text, or a function called only when it failed. */
export type What = string | (() => string)

const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

/**
 * A call's failure as the store reports it: `store: <what> failed: <cause>`, the driver's error
 * kept as `cause`. A StoreError of the store's own (a corrupt row, docs/durability.md) already
 * names what failed and is kept as it is.
 */
const failure = (what: What, cause: unknown): StoreError =>
  cause instanceof StoreError ? cause : new StoreError({ message: `store: ${typeof what === 'string' ? what : what()} failed: ${messageOf(cause)}`, cause })

/** A fenced call's failure: a superseded driver's `LeaseLostError` is kept as it is, so it knows to stop. */
const fencedFailure = (what: What, cause: unknown): StoreError | LeaseLostError => (cause instanceof LeaseLostError ? cause : failure(what, cause))

/**
 * One call to the store as an Effect: lazy like any Effect (running it makes the call; running it
 * again makes it again), failing typed. A call the store answers at once (SQLite's prepared
 * statements) is a settled `Exit`: no promise, no trip through the event loop. One that answers by
 * promise waits for it.
 *
 * Plain code that must not pay for an Effect run (the run driver's commit, docs/architecture.md,
 * "The hot path") makes the call with `now()` and reads the `Exit` it gets back.
 */
export class StoreCall<A, E> extends Effectable.Class<A, E> {
  constructor(
    private readonly what: What,
    private readonly run: () => Eventually<A>,
    private readonly failed: (what: What, cause: unknown) => E
  ) {
    super()
  }

  /** Makes the call now: its `Exit` when the store answered at once, else the Effect that waits for the answer. */
  now(): Exit.Exit<A, E> | Effect.Effect<A, E> {
    let result: Eventually<A>
    try {
      result = this.run()
    } catch (cause) {
      return Exit.fail(this.failed(this.what, cause))
    }
    if (!(result instanceof Promise)) return Exit.succeed(result)
    const pending = result
    return Effect.async<A, E>((resume) => {
      pending.then(
        (value) => resume(Exit.succeed(value)),
        (cause: unknown) => resume(Exit.fail(this.failed(this.what, cause)))
      )
    })
  }

  commit(): Effect.Effect<A, E> {
    return this.now()
  }
}

/** A read or an unfenced write of the store, failing `StoreError` (see `StoreCall`). */
export const storeCall = <A>(what: What, run: () => Eventually<A>): StoreCall<A, StoreError> => new StoreCall(what, run, failure)

/** A fenced write (or read under the fence), failing `StoreError`, or `LeaseLostError` when the lease was taken over. */
export const fencedCall = <A>(what: What, run: () => Eventually<A>): StoreCall<A, StoreError | LeaseLostError> => new StoreCall(what, run, fencedFailure)
