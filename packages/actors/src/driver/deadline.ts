import { Effect, Either, type Exit, Fiber } from 'effect'

/**
 * `self` as an Either: its own failure, or `onTimeout()` when it has not finished within `ms` (it
 * is interrupted first, so an adapter's AbortSignal fires before the failure is seen). When the
 * caller is interrupted, `self` is interrupted too, then `onInterrupt` runs.
 *
 * Effect's own `timeoutFail` races two forked fibers and a clock sleep: about 70 µs a call, most
 * of what a fast dispatch costs. Here `self` runs in one forked fiber watched by a plain timer.
 * The Either and the interrupt handler are folded in rather than wrapped around (`Effect.either`,
 * `Effect.onInterrupt`): every wrapper is a frame an idle run keeps on its stack for the whole
 * call, and the wait's own canceler is the one place an interruption passes anyway.
 */
export const attemptWithin = <A, E, R, E2>(
  self: Effect.Effect<A, E, R>,
  ms: number,
  onTimeout: () => E2,
  onInterrupt: Effect.Effect<void>
): Effect.Effect<Either.Either<A, E | E2>, never, R> =>
  Effect.flatMap(Effect.fork(self), (fiber) =>
    Effect.async<Either.Either<A, E | E2>>((resume) => {
      const observer = (exit: Exit.Exit<A, E>) => {
        clearTimeout(timer)
        resume(Effect.either(exit))
      }
      const timer = setTimeout(() => {
        fiber.removeObserver(observer)
        // Interrupted while `self` is being interrupted: the caller's `onInterrupt` still runs.
        resume(Effect.onInterrupt(Effect.as(Fiber.interrupt(fiber), Either.left(onTimeout())), () => onInterrupt))
      }, ms)
      fiber.addObserver(observer)
      return Effect.suspend(() => {
        clearTimeout(timer)
        fiber.removeObserver(observer)
        return Effect.zipRight(Fiber.interrupt(fiber), onInterrupt)
      })
    })
  )
