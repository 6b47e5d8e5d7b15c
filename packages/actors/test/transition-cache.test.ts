import { describe, expect, it, vi } from 'vitest'
import { createActor } from 'xstate'
import { type RunEvent, runMachine } from '@agentvisor/actors'
import { persistRunSnapshot, runScopeOf, runStep } from '../src/machine/run-snapshot.js'
import type { RunSnapshot } from '../src/machine/run-state.js'

// The transition cache (src/machine/transition-cache.ts) against XState itself: every event of
// the machine, in long pseudo-random sequences, sent both to an XState actor and through the
// cached step; after each, the same state, status, context and persisted snapshot.

const transient = { kind: 'transient', message: '503', httpStatus: 503 } as const
const events: ReadonlyArray<RunEvent> = [
  { type: 'PROVIDER_OK', hasToolCalls: true },
  { type: 'PROVIDER_OK', hasToolCalls: false },
  { type: 'PROVIDER_ERROR', error: transient, retryAt: 5 },
  { type: 'PROVIDER_ERROR', error: { kind: 'auth', message: '401', httpStatus: 401, provider: 'p' }, retryAt: 0 },
  { type: 'CIRCUIT_OPEN', error: transient, retryAt: 7 },
  { type: 'DISPATCH_LOST' },
  { type: 'NEXT_PROVIDER' },
  { type: 'RETRY_DUE' },
  { type: 'TOOLS_DONE' },
  { type: 'APPROVAL_REQUESTED' },
  { type: 'APPROVALS_DECIDED' },
  { type: 'INPUT_REQUESTED' },
  { type: 'INPUT_ANSWERED' },
  { type: 'CHILDREN_SPAWNED' },
  { type: 'CHILDREN_DONE' },
  { type: 'VERIFY_PASSED' },
  { type: 'VERIFY_FAILED' },
  { type: 'FOLLOW_UP', at: 11, text: 'more' },
  { type: 'CEILING_REACHED' },
  { type: 'BUDGET_REACHED', message: 'over' },
  { type: 'CANCEL' },
  { type: 'TIMEOUT' }
]

/** The hot loop's events, far more often than the rest, so that runs get long and the cache is hit. */
const pick = (random: () => number): RunEvent => {
  const r = random()
  if (r < 0.6) return events[Math.floor(random() * 2) === 0 ? 0 : 8]!
  if (r < 0.8) return events[16]!
  return events[Math.floor(random() * events.length)]!
}

/** A small deterministic generator (mulberry32): the same sequences at every run. */
const generator = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const persisted = (snapshot: RunSnapshot) => JSON.parse(JSON.stringify(persistRunSnapshot(snapshot)))

describe("the run machine's transition cache", () => {
  it('gives the snapshot XState gives, after every event of long random runs', () => {
    let compared = 0
    for (let seed = 1; seed <= 40; seed++) {
      const random = generator(seed)
      const input = { maxSteps: 2 + (seed % 20), maxRetries: seed % 3, dispatchCeiling: 50 + seed, providerCount: 1 + (seed % 3), timeoutMs: 1000 }
      const reference = createActor(runMachine, { input }).start()
      const driven = createActor(runMachine, { input })
      const scope = runScopeOf(driven)!
      let snapshot = driven.getSnapshot()
      for (let i = 0; i < 400; i++) {
        const event = pick(random)
        const before = snapshot
        reference.send(event)
        snapshot = runStep(snapshot, event, scope)
        const expected = reference.getSnapshot()
        expect(snapshot.value).toEqual(expected.value)
        expect(snapshot.status).toBe(expected.status)
        expect(persisted(snapshot)).toEqual(persisted(expected))
        expect(snapshot.matches(expected.value as never)).toBe(true)
        // An ignored event leaves the very same snapshot, which is how the driver knows it was ignored.
        if (JSON.stringify(persisted(before)) === JSON.stringify(persisted(expected)) && runMachine.getTransitionData(before, event).length === 0) {
          expect(snapshot).toBe(before)
        }
        compared++
      }
      reference.stop()
    }
    expect(compared).toBe(16_000)
  })

  it('never changes the snapshot or the context it is given (a transition with an assignment makes a new context, as XState does)', () => {
    const actor = createActor(runMachine, { input: { maxSteps: 100, maxRetries: 1, dispatchCeiling: 100, providerCount: 1, timeoutMs: 1000 } })
    const scope = runScopeOf(actor)!
    let snapshot = actor.getSnapshot()
    // Twice round the loop: the second time every transition comes from the cache.
    for (let round = 0; round < 2; round++) {
      for (const event of [{ type: 'PROVIDER_OK', hasToolCalls: true }, { type: 'TOOLS_DONE' }, { type: 'VERIFY_FAILED' }] as const) {
        const before = snapshot
        const context = JSON.stringify(before.context)
        snapshot = runStep(before, event, scope)
        expect(snapshot).not.toBe(before)
        if (event.type !== 'TOOLS_DONE') expect(snapshot.context).not.toBe(before.context)
        expect(JSON.stringify(before.context)).toBe(context)
        // The run's own children and history, never another run's that the cache first saw.
        expect(snapshot.children).toBe(before.children)
        expect(snapshot.historyValue).toBe(before.historyValue)
      }
    }
    expect(snapshot.context).toMatchObject({ step: 3, completedSteps: 2, dispatches: 2 })
  })

  it("takes the run's loop from the cache: once a (transition, state) pair is known, XState's transition is not computed again", () => {
    const input = { maxSteps: 100, maxRetries: 1, dispatchCeiling: 100, providerCount: 1, timeoutMs: 1000 }
    const loop = [{ type: 'PROVIDER_OK', hasToolCalls: true }, { type: 'TOOLS_DONE' }, { type: 'VERIFY_FAILED' }] as const
    // What XState's own actor takes, three times round the loop; computed first, as the actor
    // too calls the machine's `transition`.
    const reference = createActor(runMachine, { input }).start()
    const expected = [0, 1, 2].flatMap(() =>
      loop.map((event) => {
        reference.send(event)
        return persisted(reference.getSnapshot())
      })
    )
    reference.stop()
    const actor = createActor(runMachine, { input })
    const scope = runScopeOf(actor)!
    // The cache calls the machine's `transition` for whatever it does not hold (a first sight, a
    // pair it does not cover): counting those calls shows what came from the cache.
    const computed = vi.spyOn(runMachine, 'transition')
    try {
      let snapshot = actor.getSnapshot()
      const perRound: number[] = []
      for (let round = 0; round < 3; round++) {
        const before = computed.mock.calls.length
        for (const [i, event] of loop.entries()) {
          snapshot = runStep(snapshot, event, scope)
          expect(persisted(snapshot)).toEqual(expected[3 * round + i])
        }
        perRound.push(computed.mock.calls.length - before)
      }
      // The first round may have been computed by XState (or by an earlier test of this file: the
      // cache lives as long as the machine); the next ones never are.
      expect(perRound.slice(1)).toEqual([0, 0])
      // What the cache does not cover still goes through XState, every time: an ignored event.
      const ignored = { type: 'APPROVALS_DECIDED' } as const
      const before = computed.mock.calls.length
      expect(runStep(snapshot, ignored, scope)).toBe(snapshot)
      expect(runStep(snapshot, ignored, scope)).toBe(snapshot)
      expect(computed.mock.calls.length - before).toBe(2)
    } finally {
      computed.mockRestore()
    }
  })
})
