import { randomUUID } from 'node:crypto'
import { parseTaskContract, type TaskContract } from '@agentvisor/core'
import { Cause, Effect, Either, Exit, Scope } from 'effect'
import { afterEach, describe, expect, it } from 'vitest'
import {
  type Bus,
  BusError,
  type ChildDelivery,
  type ConsumeOptions,
  MAX_CHILD_HANDLING_FAILURES,
  NO_SUBMIT_RESPONDERS
} from '../packages/actors/src/protocol/bus.js'
import {
  type ChildRunRequest,
  type ControlReply,
  type ControlVerb,
  controlError,
  parseControlBody,
  PROTOCOL_VERSION
} from '../packages/actors/src/protocol/messages.js'
import { waitFor } from './support/cli.js'

/** What a bus implementation hands the shared suite. */
export interface BusUnderTest {
  readonly bus: Bus
  /** A second worker on the same bus (another connection for NATS; the same object in-process). */
  readonly bus2?: Bus
  /** Sends raw payload bytes as a control request, as a foreign client would, and returns the reply text. */
  readonly rawControl: (runId: string, verb: string, payload: Uint8Array) => Promise<string>
  readonly close: () => Promise<void>
}

/** Options every factory honours; each test picks the ack deadline its rule needs. */
export interface BusFactoryOptions {
  readonly ackWaitMs: number
}

// Short enough that a redelivery test takes a second; long enough that a nak or a dead handler
// visibly beats it (see LONG_ACK_WAIT_MS).
const SHORT_ACK_WAIT_MS = 1_000
// When a test proves something happens "at once", the ack deadline is far beyond its wait.
const LONG_ACK_WAIT_MS = 60_000
const AT_ONCE_MS = 10_000

const contract: TaskContract = Either.getOrThrow(
  parseTaskContract(
    {
      goal: 'Write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'primary', kind: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm' }],
      approval: 'auto'
    },
    '/tmp/agentvisor-bus-suite'
  )
)

const childRequest = (label: string): ChildRunRequest => ({
  v: PROTOCOL_VERSION,
  runId: `${label}-${randomUUID()}`,
  parentId: `parent-${randomUUID()}`,
  contract
})

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)

const fails = async <A>(effect: Effect.Effect<A, BusError>): Promise<BusError> => run(Effect.flip(effect))

/** The same rules, run against every bus implementation. */
export const busSuite = (name: string, make: (options: BusFactoryOptions) => Promise<BusUnderTest>) =>
  describe(`the ${name} bus`, () => {
    const cleanups: Array<() => Promise<void>> = []
    afterEach(async () => {
      // Scopes first (consumers, servers, watchers), then the buses they run on.
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
    })

    const setup = async (options: BusFactoryOptions = { ackWaitMs: SHORT_ACK_WAIT_MS }) => {
      const underTest = await make(options)
      cleanups.push(underTest.close)
      return { ...underTest, bus2: underTest.bus2 ?? underTest.bus }
    }

    /** A scope of the test (a worker's lifetime); closed after the test unless closed before. */
    const scoped = async () => {
      const scope = await run(Scope.make())
      let open = true
      const close = async () => {
        if (!open) return
        open = false
        await run(Scope.close(scope, Exit.void))
      }
      cleanups.push(close)
      return { within: <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => run(Scope.extend(effect, scope)), close }
    }

    const consume = async (
      bus: Bus,
      concurrency: number,
      handle: (delivery: ChildDelivery) => Effect.Effect<void, unknown>,
      options: Omit<ConsumeOptions, 'concurrency'> = {}
    ) => {
      const worker = await scoped()
      await worker.within(bus.consumeChildren(handle, { concurrency, ...options }))
      return worker
    }

    it('delivers a submitted child run with its request intact, and never again once acked', async () => {
      const { bus, bus2 } = await setup()
      const acked = childRequest('acked')
      const unacked = childRequest('unacked')
      const seen: ChildDelivery[] = []
      await consume(bus2, 1, (delivery) =>
        Effect.suspend(() => {
          seen.push(delivery)
          // The second request is left unacked once: its redelivery comes a full ack deadline
          // after the first request's ack, by when an ack that did not count would have shown.
          return delivery.request.runId === unacked.runId && delivery.deliveryCount === 1 ? Effect.void : delivery.ack
        })
      )
      await run(bus.submitChild(acked))
      await waitFor(() => (seen.length === 1 ? true : undefined), 'the first delivery')
      await run(bus.submitChild(unacked))
      await waitFor(() => (seen.some((d) => d.request.runId === unacked.runId && d.deliveryCount === 2) ? true : undefined), 'the redelivery')

      expect(seen[0]?.request).toEqual(acked)
      expect(seen[0]?.deliveryCount).toBe(1)
      expect(seen.filter((d) => d.request.runId === acked.runId)).toHaveLength(1)
    })

    it('delivers a run id submitted twice only once', async () => {
      const { bus, bus2 } = await setup()
      const twice = childRequest('twice')
      const after = childRequest('after')
      await run(bus.submitChild(twice))
      await run(bus2.submitChild(twice))
      const seen: string[] = []
      let release: () => void = () => undefined
      const released = new Promise<void>((resolve) => (release = resolve))
      await consume(bus, 1, (delivery) =>
        Effect.gen(function* () {
          seen.push(delivery.request.runId)
          // Submitted again while in flight: still the same run.
          if (delivery.request.runId === twice.runId) yield* Effect.promise(() => released)
          yield* delivery.ack
        })
      )
      await waitFor(() => (seen.length === 1 ? true : undefined), 'the first delivery')
      await run(bus.submitChild(twice))
      release()
      // Queues keep their order: a duplicate would come before the request submitted after it.
      await run(bus.submitChild(after))
      await waitFor(() => (seen.includes(after.runId) ? true : undefined), 'the request submitted after')

      expect(seen).toEqual([twice.runId, after.runId])
    })

    it('shares one queue between two consumers, each request going to exactly one of them', async () => {
      const { bus, bus2 } = await setup()
      const requests = Array.from({ length: 6 }, (_, i) => childRequest(`shared${i}`))
      const byConsumer: Record<'first' | 'second', string[]> = { first: [], second: [] }
      let inFlight = 0
      let mostInFlight = 0
      const handler = (consumer: 'first' | 'second') => (delivery: ChildDelivery) =>
        Effect.gen(function* () {
          byConsumer[consumer].push(delivery.request.runId)
          inFlight += 1
          mostInFlight = Math.max(mostInFlight, inFlight)
          // Each consumer takes one at a time and holds it until the other holds one too, so
          // the second request can only go to the other consumer.
          yield* Effect.promise(() => waitFor(() => (mostInFlight >= 2 ? true : undefined), 'both consumers busy'))
          inFlight -= 1
          yield* delivery.ack
        })
      await consume(bus, 1, handler('first'))
      await consume(bus2, 1, handler('second'))
      for (const request of requests) await run(bus.submitChild(request))
      await waitFor(() => (byConsumer.first.length + byConsumer.second.length >= requests.length ? true : undefined), 'every delivery')

      const delivered = [...byConsumer.first, ...byConsumer.second]
      expect([...delivered].sort()).toEqual(requests.map((r) => r.runId).sort())
      expect(byConsumer.first.length).toBeGreaterThan(0)
      expect(byConsumer.second.length).toBeGreaterThan(0)
    })

    it('delivers a request its dead worker never acked to another worker, counting the delivery', async () => {
      const { bus, bus2 } = await setup()
      const request = childRequest('orphan')
      const firstWorker: ChildDelivery[] = []
      const dying = await consume(bus, 1, (delivery) => Effect.sync(() => firstWorker.push(delivery)).pipe(Effect.zipRight(Effect.never)))
      await run(bus.submitChild(request))
      await waitFor(() => firstWorker[0], 'the first delivery')
      await dying.close()

      const secondWorker: ChildDelivery[] = []
      await consume(bus2, 1, (delivery) => Effect.sync(() => secondWorker.push(delivery)).pipe(Effect.zipRight(delivery.ack)))
      const redelivered = await waitFor(() => secondWorker[0], 'the redelivery')

      expect(firstWorker).toHaveLength(1)
      expect(firstWorker[0]?.deliveryCount).toBe(1)
      expect(redelivered.request).toEqual(request)
      expect(redelivered.deliveryCount).toBe(2)
    })

    it('extends the ack deadline of a delivery its worker reports working on', async () => {
      const { bus, bus2 } = await setup()
      const request = childRequest('busy')
      const after = childRequest('after')
      const seen: ChildDelivery[] = []
      let finished = false
      await consume(bus, 1, (delivery) =>
        Effect.gen(function* () {
          seen.push(delivery)
          // Three ack deadlines of work, reporting progress twice per deadline.
          for (let i = 0; i < 6; i++) {
            yield* Effect.sleep(SHORT_ACK_WAIT_MS / 2)
            yield* delivery.working
          }
          yield* delivery.ack
          finished = true
        })
      )
      await run(bus.submitChild(request))
      await waitFor(() => seen[0], 'the delivery')
      // Another worker idles meanwhile: it would get the request as soon as its deadline passed.
      await consume(bus2, 1, (delivery) => Effect.sync(() => seen.push(delivery)).pipe(Effect.zipRight(delivery.ack)))
      await waitFor(() => (finished ? true : undefined), 'the work to finish')
      await run(bus.submitChild(after))
      await waitFor(() => (seen.some((d) => d.request.runId === after.runId) ? true : undefined), 'the request submitted after')

      expect(seen.filter((d) => d.request.runId === request.runId)).toHaveLength(1)
    })

    it('hands a nacked request back at once', async () => {
      const { bus, bus2 } = await setup({ ackWaitMs: LONG_ACK_WAIT_MS })
      const request = childRequest('nacked')
      const seen: ChildDelivery[] = []
      await consume(bus2, 1, (delivery) =>
        Effect.sync(() => seen.push(delivery)).pipe(Effect.zipRight(delivery.deliveryCount === 1 ? delivery.nak : delivery.ack))
      )
      await run(bus.submitChild(request))
      const again = await waitFor(() => seen[1], 'the redelivery', AT_ONCE_MS)

      expect(again.request).toEqual(request)
      expect(again.deliveryCount).toBe(2)
    })

    it('tries a handler that throws or dies again in the same delivery, logging the cause, and keeps delivering others', async () => {
      const { bus, bus2 } = await setup({ ackWaitMs: LONG_ACK_WAIT_MS })
      const throws = childRequest('throws')
      const dies = childRequest('dies')
      const fine = childRequest('fine')
      const seen: ChildDelivery[] = []
      const tries = new Map<string, number>()
      const lines: string[] = []
      await consume(
        bus2,
        1,
        (delivery) =>
          Effect.gen(function* () {
            seen.push(delivery)
            const tried = (tries.get(delivery.request.runId) ?? 0) + 1
            tries.set(delivery.request.runId, tried)
            if (tried === 1 && delivery.request.runId === throws.runId) throw new Error('handler bug')
            if (tried === 1 && delivery.request.runId === dies.runId) return yield* Effect.die('handler defect')
            yield* delivery.ack
          }),
        { log: (line) => lines.push(line), retryBaseMs: 10 }
      )
      for (const request of [throws, dies, fine]) await run(bus.submitChild(request))
      await waitFor(
        () => ([throws, dies, fine].every((r) => (tries.get(r.runId) ?? 0) >= (r === fine ? 1 : 2)) ? true : undefined),
        'every request handled',
        AT_ONCE_MS
      )

      expect(tries.get(fine.runId)).toBe(1)
      // Tried again within its first delivery: the bus did not have to hand it out again.
      expect(seen.filter((d) => d.request.runId === throws.runId).map((d) => d.deliveryCount)).toEqual([1, 1])
      expect(seen.filter((d) => d.request.runId === dies.runId).map((d) => d.deliveryCount)).toEqual([1, 1])
      expect(lines).toContainEqual(
        expect.stringMatching(new RegExp(`child run ${throws.runId}: handling failed \\(1 of ${MAX_CHILD_HANDLING_FAILURES}\\): handler bug`))
      )
      expect(lines).toContainEqual(
        expect.stringMatching(new RegExp(`child run ${dies.runId}: handling failed \\(1 of ${MAX_CHILD_HANDLING_FAILURES}\\): handler defect`))
      )
    })

    it(`gives a request up after its handler died ${MAX_CHILD_HANDLING_FAILURES} times: its run is given up with the cause, the request is never delivered again, and the worker serves the others`, async () => {
      const { bus, bus2 } = await setup()
      const doomed = childRequest('doomed')
      const fine = childRequest('fine')
      const unacked = childRequest('unacked')
      const seen: ChildDelivery[] = []
      const givenUp: Array<{ runId: string; cause: string }> = []
      await consume(
        bus2,
        1,
        (delivery) =>
          Effect.suspend(() => {
            seen.push(delivery)
            if (delivery.request.runId === doomed.runId) return Effect.die(new Error('handler defect'))
            // Left unacked once: its redelivery comes a full ack deadline later.
            if (delivery.request.runId === unacked.runId && delivery.deliveryCount === 1) return Effect.void
            return delivery.ack
          }),
        {
          log: () => undefined,
          retryBaseMs: 10,
          giveUp: (request, cause) => Effect.sync(() => void givenUp.push({ runId: request.runId, cause: Cause.pretty(cause) }))
        }
      )
      await run(bus.submitChild(doomed))
      await run(bus.submitChild(fine))
      await waitFor(() => (seen.some((d) => d.request.runId === fine.runId) ? true : undefined), 'the request after the doomed one')
      // Submitted once the doomed one was given up; its redelivery comes an ack deadline later,
      // by when a doomed request that was not terminated would have come back.
      await run(bus.submitChild(unacked))
      await waitFor(() => (seen.some((d) => d.request.runId === unacked.runId && d.deliveryCount === 2) ? true : undefined), 'the redelivery')

      const doomedTries = seen.filter((d) => d.request.runId === doomed.runId)
      expect(doomedTries).toHaveLength(MAX_CHILD_HANDLING_FAILURES)
      expect(doomedTries.every((d) => d.deliveryCount === 1)).toBe(true)
      expect(givenUp).toHaveLength(1)
      expect(givenUp[0]?.runId).toBe(doomed.runId)
      expect(givenUp[0]?.cause).toContain('handler defect')
    })

    it('hands a request back instead of terminating it when giving its run up fails', async () => {
      const { bus, bus2 } = await setup({ ackWaitMs: LONG_ACK_WAIT_MS })
      const doomed = childRequest('doomed')
      const seen: ChildDelivery[] = []
      const lines: string[] = []
      let giveUps = 0
      await consume(
        bus2,
        1,
        (delivery) =>
          Effect.suspend(() => {
            seen.push(delivery)
            return delivery.deliveryCount === 1 ? Effect.die(new Error('handler defect')) : delivery.ack
          }),
        {
          log: (line) => lines.push(line),
          retryBaseMs: 10,
          giveUp: () =>
            Effect.suspend(() => {
              giveUps += 1
              return Effect.fail(new Error('store down'))
            })
        }
      )
      await run(bus.submitChild(doomed))
      const again = await waitFor(() => seen.find((d) => d.deliveryCount === 2), 'the redelivery', AT_ONCE_MS)

      expect(again.request).toEqual(doomed)
      expect(giveUps).toBe(1)
      expect(lines).toContainEqual(expect.stringContaining(`child run ${doomed.runId}: cannot give it up, handing it back: store down`))
    })

    it('publishes done messages to every watcher', async () => {
      const { bus, bus2 } = await setup()
      const watcher = await scoped()
      const received: unknown[] = []
      await watcher.within(bus.watchDone((message) => received.push(message)))
      const message = { v: PROTOCOL_VERSION, runId: randomUUID(), status: 'succeeded', steps: 3, result: 'DONE' } as const
      await run(bus2.publishDone(message))
      await waitFor(() => received[0], 'the done message')

      expect(received).toEqual([message])
    })

    it('publishes the events of a run to the watchers of that run only', async () => {
      const { bus, bus2 } = await setup()
      const watched = randomUUID()
      const other = randomUUID()
      const watcher = await scoped()
      const received: unknown[] = []
      await watcher.within(bus.watchEvents(watched, (message) => received.push(message)))
      const at = new Date().toISOString()
      const event = (runId: string, seq: number) => ({ v: PROTOCOL_VERSION, runId, seq, from: 'running', event: 'STEP', to: 'running', at }) as const
      // From one publisher, in order: the other run's event would arrive before the watched one.
      await run(bus2.publishEvent(event(other, 1)))
      await run(bus2.publishEvent(event(watched, 1)))
      await run(bus2.publishEvent(event(watched, 2)))
      await waitFor(() => (received.length >= 2 ? true : undefined), 'the watched run events')

      expect(received).toEqual([event(watched, 1), event(watched, 2)])
    })

    it('round-trips a control request to the served handler with its JSON body, run id and verb', async () => {
      const { bus, bus2 } = await setup()
      const calls: Array<{ runId: string; verb: ControlVerb; body: string }> = []
      const server = await scoped()
      await server.within(
        bus2.serveControl((runId, verb, body) =>
          Effect.sync(() => {
            calls.push({ runId, verb, body })
            return { v: PROTOCOL_VERSION, ok: true as const, decided: ['r1'] }
          })
        )
      )
      const runId = randomUUID()
      const reply = await run(bus.control(runId, 'approve', { requestId: 'r1', decision: 'approve' }))

      expect(reply).toEqual({ v: PROTOCOL_VERSION, ok: true, decided: ['r1'] })
      expect(calls).toHaveLength(1)
      expect(calls[0]?.runId).toBe(runId)
      expect(calls[0]?.verb).toBe('approve')
      expect(JSON.parse(calls[0]?.body ?? '')).toEqual({ v: PROTOCOL_VERSION, requestId: 'r1', decision: 'approve' })
    })

    it('answers each control request from one server only', async () => {
      const { bus, bus2 } = await setup()
      const answered: string[] = []
      for (const [server, who] of [
        [bus, 'first'],
        [bus2, 'second']
      ] as const) {
        const scope = await scoped()
        await scope.within(server.serveControl(() => Effect.sync(() => (answered.push(who), { v: PROTOCOL_VERSION, ok: true as const }))))
      }
      for (let i = 0; i < 8; i++) expect(await run(bus.control(randomUUID(), 'status', {}))).toEqual({ v: PROTOCOL_VERSION, ok: true })

      expect(answered).toHaveLength(8)
    })

    it('fails a control request nobody serves with a BusError', async () => {
      const { bus } = await setup()
      const error = await fails(bus.control(randomUUID(), 'cancel', {}, 1_000))

      expect(error).toBeInstanceOf(BusError)
      expect(error.message).toMatch(/no responders/)
    })

    it('fails a control request its server does not answer in time with a BusError', async () => {
      const { bus, bus2 } = await setup()
      const server = await scoped()
      await server.within(bus2.serveControl(() => Effect.never))
      const error = await fails(bus.control(randomUUID(), 'status', {}, 300))

      expect(error).toBeInstanceOf(BusError)
      expect(error.message).toMatch(/timed out after 300ms/)
    })

    it('answers malformed control payloads with ok:false and keeps serving', async () => {
      const { bus, bus2, rawControl } = await setup()
      const server = await scoped()
      await server.within(
        bus2.serveControl((_runId, verb, body) =>
          Effect.sync(
            (): ControlReply => Either.match(parseControlBody(verb, body), { onLeft: controlError, onRight: () => ({ v: PROTOCOL_VERSION, ok: true }) })
          )
        )
      )
      const runId = randomUUID()
      const notJson = JSON.parse(await rawControl(runId, 'approve', new Uint8Array([0xff, 0x7b, 0x6e, 0x6f]))) as unknown
      const wrongShape = await run(bus.control(runId, 'approve', { decision: 'maybe' }))
      const unknownVerb = await run(bus.control(runId, 'explode' as ControlVerb, {}))
      const unknownField = await run(bus.control(runId, 'approve', { decision: 'deny', remeber: true }))
      const fine = await run(bus.control(runId, 'approve', { decision: 'deny' }))

      expect(unknownField).toEqual({ v: PROTOCOL_VERSION, ok: false, error: 'remeber: is not a known field' })
      expect(notJson).toEqual({ v: PROTOCOL_VERSION, ok: false, error: 'payload is not JSON' })
      expect(wrongShape).toMatchObject({ v: PROTOCOL_VERSION, ok: false, error: expect.stringMatching(/^decision: /) })
      expect(unknownVerb).toEqual({ v: PROTOCOL_VERSION, ok: false, error: 'unknown control verb "explode"' })
      expect(fine).toEqual({ v: PROTOCOL_VERSION, ok: true })
    })

    it('answers a control request for an invalid run id with ok:false without calling the handler', async () => {
      const { bus2, rawControl } = await setup()
      const calls: string[] = []
      const server = await scoped()
      await server.within(bus2.serveControl((runId) => Effect.sync(() => (calls.push(runId), { v: PROTOCOL_VERSION, ok: true as const }))))
      const tooLong = 'r'.repeat(65)
      const body = new TextEncoder().encode('{"v":1}')
      const replies = [
        JSON.parse(await rawControl(tooLong, 'status', body)),
        JSON.parse(await rawControl('ab%$', 'cancel', body)),
        JSON.parse(await rawControl('ok-id_1', 'status', body))
      ] as unknown[]

      expect(replies).toEqual([
        { v: PROTOCOL_VERSION, ok: false, error: `run id "${tooLong}" is not valid: expected 1 to 64 letters, digits, "_" or "-"` },
        { v: PROTOCOL_VERSION, ok: false, error: 'run id "ab%$" is not valid: expected 1 to 64 letters, digits, "_" or "-"' },
        { v: PROTOCOL_VERSION, ok: true }
      ])
      expect(calls).toEqual(['ok-id_1'])
    })

    it('hands each submission to one server with its body intact, answers one whose handler dies with an internal error, and fails one nobody serves', async () => {
      const { bus, bus2 } = await setup()
      const nobody = await fails(bus.submit({ contract: { goal: 'g' } }, 1_000))
      expect(nobody).toBeInstanceOf(BusError)
      expect(nobody.message).toBe(NO_SUBMIT_RESPONDERS)

      const bodies: string[] = []
      const lines: string[] = []
      for (const server of [bus, bus2]) {
        const scope = await scoped()
        await scope.within(
          server.serveSubmit(
            (body) =>
              body.includes('"die"')
                ? Effect.die(new Error('handler bug'))
                : Effect.sync(() => (bodies.push(body), { v: PROTOCOL_VERSION, ok: true as const, runId: 'r-1' })),
            { log: (line) => lines.push(line) }
          )
        )
      }
      for (let i = 0; i < 4; i++) expect(await run(bus.submit({ contract: { goal: `g${i}` } }))).toEqual({ v: PROTOCOL_VERSION, ok: true, runId: 'r-1' })
      expect(await run(bus.submit({ contract: { goal: 'die' } }))).toEqual({ v: PROTOCOL_VERSION, ok: false, error: 'internal error' })

      expect(bodies.map((body) => JSON.parse(body) as unknown)).toEqual([0, 1, 2, 3].map((i) => ({ v: PROTOCOL_VERSION, contract: { goal: `g${i}` } })))
      expect(lines).toEqual(['a submitted run failed to be taken: handler bug'])
    })

    it('answers a control handler that dies with an internal error and keeps serving', async () => {
      const { bus, bus2 } = await setup()
      const server = await scoped()
      const lines: string[] = []
      await server.within(
        bus2.serveControl(
          (runId) => (runId.startsWith('die-') ? Effect.die(new Error('handler bug')) : Effect.succeed({ v: PROTOCOL_VERSION, ok: true as const })),
          {
            log: (line) => lines.push(line)
          }
        )
      )
      const dying = `die-${randomUUID()}`
      const died = await run(bus.control(dying, 'status', {}))
      const fine = await run(bus.control(randomUUID(), 'status', {}))

      expect(died).toEqual({ v: PROTOCOL_VERSION, ok: false, error: 'internal error' })
      expect(fine).toEqual({ v: PROTOCOL_VERSION, ok: true })
      expect(lines).toEqual([`control status of run ${dying} failed: handler bug`])
    })
  })
