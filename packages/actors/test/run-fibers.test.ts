import { Deferred, Effect, Exit, Fiber, FiberRef } from 'effect'
import { describe, expect, it } from 'vitest'
import { makeRunFibers } from '../src/supervisor/run-fibers.js'

describe('the run fibers of a supervisor', () => {
  it('interrupts every run still going when it closes, latest first, each one awaited before the next', async () => {
    const order: string[] = []
    const runFibers = makeRunFibers()
    const started = await Effect.runPromise(Deferred.make<void>())
    const run = (name: string) =>
      Effect.zipRight(Deferred.succeed(started, undefined), Effect.never).pipe(
        // A slow finalizer: the next run is interrupted only once this one has ended.
        Effect.onInterrupt(() =>
          Effect.zipRight(
            Effect.sync(() => order.push(`${name} stopping`)),
            Effect.zipRight(
              Effect.sleep(20),
              Effect.sync(() => order.push(`${name} stopped`))
            )
          )
        )
      )
    const first = await Effect.runPromise(runFibers.fork(run('first')))
    const second = await Effect.runPromise(runFibers.fork(run('second')))
    await Effect.runPromise(Deferred.await(started))
    await Effect.runPromise(Effect.yieldNow())

    await Effect.runPromise(runFibers.interruptAll)

    expect(order).toEqual(['second stopping', 'second stopped', 'first stopping', 'first stopped'])
    expect(Exit.isInterrupted(await Effect.runPromise(Fiber.await(first)))).toBe(true)
    expect(Exit.isInterrupted(await Effect.runPromise(Fiber.await(second)))).toBe(true)
  })

  it('interrupts at once a run forked after it closed', async () => {
    const runFibers = makeRunFibers()
    await Effect.runPromise(runFibers.interruptAll)
    let ran = false
    const late = await Effect.runPromise(runFibers.fork(Effect.sync(() => (ran = true))))

    expect(Exit.isInterrupted(await Effect.runPromise(Fiber.await(late)))).toBe(true)
    expect(ran).toBe(false)
  })

  it('leaves a run that ended alone, with its own result', async () => {
    const runFibers = makeRunFibers()
    const done = await Effect.runPromise(runFibers.fork(Effect.succeed('finished')))
    expect(await Effect.runPromise(Fiber.join(done))).toBe('finished')

    await Effect.runPromise(runFibers.interruptAll)

    expect(await Effect.runPromise(Fiber.await(done))).toEqual(Exit.succeed('finished'))
  })

  it("gives a run the launcher's fiber refs, as a fork would", async () => {
    const ref = FiberRef.unsafeMake('default')
    const runFibers = makeRunFibers()
    const fiber = await Effect.runPromise(Effect.locally(runFibers.fork(FiberRef.get(ref)), ref, 'the launcher'))

    expect(await Effect.runPromise(Fiber.join(fiber))).toBe('the launcher')
  })
})
