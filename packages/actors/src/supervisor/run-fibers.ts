import { Effect, Fiber, Runtime } from 'effect'

/** The run fibers of one supervisor (launch-run.ts forks each run's drive here). */
export interface RunFibers {
  /** Forks `effect` as a run fiber; once closed, the fiber is interrupted at once. */
  readonly fork: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<Fiber.RuntimeFiber<A, E>>
  /** Interrupts every run fiber still going, each awaited; later forks are interrupted at once. */
  readonly interruptAll: Effect.Effect<void>
}

/**
 * The fibers of the runs one supervisor drives, interrupted (latest first, one at a time, as a
 * scope closes its forks) when it closes.
 *
 * `Effect.forkIn` would do, but every fork made from a fiber keeps that fiber alive as long as
 * the child runs (Effect's fork closes over its parent): a run would pin the short-lived fiber
 * that launched it, about a kilobyte each. A run is forked here from the launcher's runtime
 * instead (its context, fiber refs and flags, not the fiber), so it inherits all the same.
 */
export const makeRunFibers = (): RunFibers => {
  const live = new Set<Fiber.RuntimeFiber<unknown, unknown>>()
  let closed = false

  /** Forks `effect` as a run fiber; once closed, the fiber is interrupted at once. */
  const fork = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<Fiber.RuntimeFiber<A, E>> =>
    Effect.fiberIdWith((launcher) =>
      Effect.map(Effect.runtime<never>(), (runtime) => {
        // Not `immediate`: like a fork, the run starts on the scheduler, not inside this call.
        const fiber = Runtime.runFork(runtime)(effect, { immediate: false })
        if (closed) {
          fiber.unsafeInterruptAsFork(launcher)
        } else {
          track(live, fiber)
        }
        return fiber
      })
    )

  /** Interrupts every run fiber still going, each awaited; later forks are interrupted at once. */
  const interruptAll: Effect.Effect<void> = Effect.suspend(() => {
    closed = true
    return Effect.forEach([...live].reverse(), (fiber) => Fiber.interrupt(fiber), { discard: true })
  })

  return { fork, interruptAll }
}

/** Out of line, so the observer's closure holds the set and the fiber, not the forked effect. */
const track = (live: Set<Fiber.RuntimeFiber<unknown, unknown>>, fiber: Fiber.RuntimeFiber<unknown, unknown>): void => {
  live.add(fiber)
  fiber.addObserver(() => live.delete(fiber))
}
