import { LeaseLostError } from '@agentvisor/store'
import { Deferred, Effect, Either, Exit, Fiber } from 'effect'
import { describe, expect, it } from 'vitest'
import { makeStopSignal } from '../src/supervisor/stop-signal.js'

/** A drive that runs until stopped, recording how it ended and what ran after. */
const endless = () => {
  const events: string[] = []
  const started = Effect.runSync(Deferred.make<void>())
  const drive = Effect.zipRight(Deferred.succeed(started, undefined), Effect.never).pipe(
    Effect.onInterrupt(() => Effect.sync(() => events.push('drive interrupted')))
  )
  const afterInterrupt = Effect.sync(() => events.push('afterInterrupt'))
  return { events, started: Deferred.await(started), drive, afterInterrupt }
}

describe("a run's stop signal", () => {
  it('answers settled when the drive ends by itself before its deadline, without running afterInterrupt', async () => {
    const stop = makeStopSignal('run-1')
    stop.arm(60_000)
    let after = false
    const outcome = await Effect.runPromise(
      stop.race(
        Effect.void,
        Effect.sync(() => (after = true))
      )
    )
    stop.dispose()

    expect(outcome).toBe('settled')
    expect(after).toBe(false)
  })

  it("hands on the drive's own failure", async () => {
    const stop = makeStopSignal('run-1')
    const outcome = await Effect.runPromise(Effect.either(stop.race(Effect.fail('store down' as const), Effect.void)))

    expect(outcome).toEqual(Either.left('store down'))
  })

  it('stops the drive at its deadline: the drive is interrupted and afterInterrupt has run before timeout is answered', async () => {
    const stop = makeStopSignal('run-1')
    const { events, drive, afterInterrupt } = endless()
    stop.arm(20)
    const outcome = await Effect.runPromise(stop.race(drive, afterInterrupt))
    events.push(outcome)

    expect(events).toEqual(['drive interrupted', 'afterInterrupt', 'timeout'])
  })

  it('stops the drive at a cancel from this process or from the store, whichever comes', async () => {
    for (const cancel of ['local', 'store'] as const) {
      const stop = makeStopSignal('run-1')
      const { events, started, drive, afterInterrupt } = endless()
      const racing = Effect.runFork(stop.race(drive, afterInterrupt))
      await Effect.runPromise(started)
      if (cancel === 'local') stop.cancel()
      else stop.leaseEvents.onCancelRequested()

      expect(await Effect.runPromise(Fiber.join(racing))).toBe('cancel')
      expect(events).toEqual(['drive interrupted', 'afterInterrupt'])
    }
  })

  it('fails with the LeaseLostError once another driver took the lease over', async () => {
    const stop = makeStopSignal('run-1')
    const { events, started, drive, afterInterrupt } = endless()
    const racing = Effect.runFork(Effect.either(stop.race(drive, afterInterrupt)))
    await Effect.runPromise(started)
    const lost = new LeaseLostError({ runId: 'run-1' })
    stop.leaseEvents.onLost(lost)

    expect(await Effect.runPromise(Fiber.join(racing))).toEqual(Either.left(lost))
    expect(events).toEqual(['drive interrupted', 'afterInterrupt'])
  })

  it('stops a drive at once when the stop came before the race began, and keeps the first reason', async () => {
    const stop = makeStopSignal('run-1')
    const { events, drive, afterInterrupt } = endless()
    stop.cancel()
    stop.arm(0)
    const outcome = await Effect.runPromise(stop.race(drive, afterInterrupt))

    expect(outcome).toBe('cancel')
    expect(events.at(-1)).toBe('afterInterrupt')
  })

  it('interrupts the drive and runs afterInterrupt when the race itself is interrupted', async () => {
    const stop = makeStopSignal('run-1')
    const { events, started, drive, afterInterrupt } = endless()
    const racing = Effect.runFork(stop.race(drive, afterInterrupt))
    await Effect.runPromise(started)

    expect(Exit.isInterrupted(await Effect.runPromise(Fiber.interrupt(racing)))).toBe(true)
    expect(events).toEqual(['drive interrupted', 'afterInterrupt'])
  })
})
