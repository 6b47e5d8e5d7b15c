import { Deferred, Effect, Either, Exit, Fiber } from 'effect'
import { describe, expect, it } from 'vitest'
import { attemptWithin } from '../src/driver/deadline.js'

const timedOut = () => 'timed out' as const

describe('an attempt within a deadline', () => {
  it('answers what the attempt answered when it ends in time', async () => {
    const answer = await Effect.runPromise(attemptWithin(Effect.succeed(42), 60_000, timedOut, Effect.void))

    expect(answer).toEqual(Either.right(42))
  })

  it('answers its own failure as a Left, not the timeout', async () => {
    const answer = await Effect.runPromise(attemptWithin(Effect.fail('refused' as const), 60_000, timedOut, Effect.void))

    expect(answer).toEqual(Either.left('refused'))
  })

  it('interrupts an attempt still going at its deadline before answering the timeout', async () => {
    const events: string[] = []
    const slow = Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => events.push('attempt interrupted'))))
    const answer = await Effect.runPromise(
      attemptWithin(
        slow,
        20,
        timedOut,
        Effect.sync(() => events.push('onInterrupt'))
      )
    )
    events.push('answered')

    expect(answer).toEqual(Either.left('timed out'))
    // The caller's onInterrupt is for the caller being interrupted, not for the deadline.
    expect(events).toEqual(['attempt interrupted', 'answered'])
  })

  it('interrupts the attempt and then runs onInterrupt when its caller is interrupted', async () => {
    const events: string[] = []
    const started = await Effect.runPromise(Deferred.make<void>())
    const slow = Effect.zipRight(Deferred.succeed(started, undefined), Effect.never).pipe(
      Effect.onInterrupt(() => Effect.sync(() => events.push('attempt interrupted')))
    )
    const caller = Effect.runFork(
      attemptWithin(
        slow,
        60_000,
        timedOut,
        Effect.sync(() => events.push('onInterrupt'))
      )
    )
    await Effect.runPromise(Deferred.await(started))

    const exit = await Effect.runPromise(Fiber.interrupt(caller))

    expect(Exit.isInterrupted(exit)).toBe(true)
    expect(events).toEqual(['attempt interrupted', 'onInterrupt'])
  })
})
