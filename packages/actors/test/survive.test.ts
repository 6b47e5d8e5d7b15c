import { it } from '@effect/vitest'
import { Clock, Effect, Fiber, TestClock } from 'effect'
import { describe, expect } from 'vitest'
import { surviving } from '../src/loop/survive.js'

describe('a loop step that survives failures', () => {
  it.effect('runs again after a failure and after a defect, logging each cause in one line, until it succeeds', () =>
    Effect.gen(function* () {
      const lines: string[] = []
      let tries = 0
      const step = Effect.suspend(() => {
        tries += 1
        if (tries === 1) return Effect.fail(new Error('database is locked\nat line 2'))
        if (tries === 2) return Effect.die(new Error('a bug'))
        return Effect.succeed('answered')
      })
      const fiber = yield* Effect.fork(surviving('poll the store', step, (line) => lines.push(line)))
      yield* TestClock.adjust('1 second')
      const answer = yield* Fiber.join(fiber)

      expect(answer).toBe('answered')
      expect(tries).toBe(3)
      expect(lines).toEqual(['poll the store failed, trying again: database is locked', 'poll the store failed, trying again: a bug'])
    })
  )

  it.effect('waits 100 ms after a first failure, doubling, and never more than 5 s between tries', () =>
    Effect.gen(function* () {
      const at: number[] = []
      const step = Effect.flatMap(Clock.currentTimeMillis, (now) => (at.push(now), at.length < 10 ? Effect.fail('down') : Effect.void))
      const fiber = yield* Effect.fork(surviving('poll', step, () => undefined))
      yield* TestClock.adjust('1 minute')
      yield* Fiber.join(fiber)

      const pauses = at.slice(1).map((t, i) => t - (at[i] ?? 0))
      expect(pauses).toEqual([100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000])
    })
  )

  it.effect('is ended by interruption only, and says nothing of it', () =>
    Effect.gen(function* () {
      const lines: string[] = []
      const fiber = yield* Effect.fork(surviving('poll', Effect.fail('down'), (line) => lines.push(line)))
      yield* TestClock.adjust('250 millis')
      yield* Fiber.interrupt(fiber)
      const tries = lines.length
      yield* TestClock.adjust('1 minute')

      expect(tries).toBe(2)
      expect(lines).toHaveLength(tries)
    })
  )
})
