import { it } from '@effect/vitest'
import { Cause, Effect, Exit, Fiber, TestClock } from 'effect'
import { describe, expect } from 'vitest'
import { type ChildDelivery, handleInProgress } from '../src/protocol/bus.js'
import { PROTOCOL_VERSION } from '../src/protocol/messages.js'

const delivery = (): ChildDelivery & { readonly reports: () => number } => {
  let reports = 0
  return {
    request: { v: PROTOCOL_VERSION, runId: 'child', parentId: 'parent', contract: {} as ChildDelivery['request']['contract'] },
    deliveryCount: 1,
    working: Effect.sync(() => {
      reports += 1
    }),
    ack: Effect.void,
    nak: Effect.void,
    term: Effect.void,
    reports: () => reports
  }
}

describe('keeping a delivery in progress', () => {
  it.effect('reports the delivery working every third of the ack deadline while its handler runs', () =>
    Effect.gen(function* () {
      const d = delivery()
      const fiber = yield* Effect.fork(handleInProgress(d, 30_000, () => Effect.sleep('95 seconds')))
      yield* TestClock.adjust('9 seconds')
      const early = d.reports()
      yield* TestClock.adjust('86 seconds')
      yield* Fiber.join(fiber)

      // Never a whole ack deadline without a report: 10 s apart for a 30 s deadline.
      expect(early).toBe(0)
      expect(d.reports()).toBe(9)
    })
  )

  it.effect('stops reporting once the handler has ended', () =>
    Effect.gen(function* () {
      const d = delivery()
      const fiber = yield* Effect.fork(handleInProgress(d, 3_000, () => Effect.sleep('2500 millis')))
      yield* TestClock.adjust('2500 millis')
      yield* Fiber.join(fiber)
      const atEnd = d.reports()
      yield* TestClock.adjust('1 minute')

      expect(atEnd).toBe(2)
      expect(d.reports()).toBe(atEnd)
    })
  )

  it.effect('stops reporting when the handler dies, and hands its cause on', () =>
    Effect.gen(function* () {
      const d = delivery()
      const fiber = yield* Effect.fork(handleInProgress(d, 3_000, () => Effect.zipRight(Effect.sleep('1500 millis'), Effect.die(new Error('handler bug')))))
      yield* TestClock.adjust('1500 millis')
      const exit = yield* Fiber.await(fiber)
      yield* TestClock.adjust('1 minute')

      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      expect(d.reports()).toBe(1)
    })
  )

  it.effect('reports at most every 50 ms, however short the ack deadline', () =>
    Effect.gen(function* () {
      const d = delivery()
      const fiber = yield* Effect.fork(handleInProgress(d, 30, () => Effect.sleep('1010 millis')))
      yield* TestClock.adjust('1010 millis')
      yield* Fiber.join(fiber)

      // Not every 10 ms (a third of 30): every 50 ms, 20 times in a second.
      expect(d.reports()).toBe(20)
    })
  )
})
