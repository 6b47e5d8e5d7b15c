import { randomUUID } from 'node:crypto'
import { jetstream, jetstreamManager } from '@nats-io/jetstream'
import { Effect, Exit, Scope } from 'effect'
import { afterEach, describe, expect, inject, it } from 'vitest'
import type { ChildDelivery } from '../packages/actors/src/protocol/bus.js'
import { makeInProcessBus } from '../packages/actors/src/bus/in-process-bus.js'
import { type ControlVerb, PROTOCOL_VERSION, Subjects } from '../packages/actors/src/protocol/messages.js'
import { makeNatsBus, natsBusOptionsFromEnv } from '../packages/actors/src/bus/nats-bus.js'
import { natsSubjects } from '../packages/actors/src/bus/nats-subjects.js'
import { type BusFactoryOptions, busSuite } from './bus-suite.js'
import { waitFor } from './support/cli.js'
import { natsWorldPerTest } from './support/nats.js'

const natsUrl = inject('natsUrl')

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)

busSuite('in-process', async ({ ackWaitMs }) => {
  const bus = makeInProcessBus({ ackWaitMs })
  return {
    bus,
    rawControl: async (runId, verb, payload) => JSON.stringify(await run(bus.control(runId, verb as ControlVerb, payload))),
    close: async () => undefined
  }
})

// Each test's own stream, durable and subjects on the shared server (its world), deleted after it.
const natsWorld = natsWorldPerTest()

/** Two workers (two connections) on one isolated queue, plus a raw connection playing a foreign client. */
const natsUnderTest = async ({ ackWaitMs }: BusFactoryOptions) => {
  const world = natsWorld()
  const options = world.busOptions(ackWaitMs)
  const scope = await run(Scope.make())
  const bus = await run(Scope.extend(makeNatsBus(options), scope))
  const bus2 = await run(Scope.extend(makeNatsBus(options), scope))
  const raw = await world.connect()
  const subjects = natsSubjects(options.subjectPrefix)
  return {
    options,
    raw,
    bus,
    bus2,
    rawControl: async (runId: string, verb: string, payload: Uint8Array) =>
      new TextDecoder().decode((await raw.request(subjects.control(runId, verb), payload, { timeout: 60_000 })).data),
    close: () => run(Scope.close(scope, Exit.void))
  }
}

busSuite('nats', natsUnderTest)

describe('the nats bus on the wire', () => {
  const cleanups: Array<() => Promise<void>> = []
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  })

  const setup = async () => {
    const underTest = await natsUnderTest({ ackWaitMs: 60_000 })
    cleanups.push(underTest.close)
    const scope = await run(Scope.make())
    cleanups.push(() => run(Scope.close(scope, Exit.void)))
    const within = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => run(Scope.extend(effect, scope))
    return { ...underTest, within }
  }

  const request = (runId: string) => ({
    v: PROTOCOL_VERSION,
    runId,
    parentId: 'parent',
    contract: { goal: 'g', workspace: '/tmp/ws', providers: [{ name: 'p', kind: 'openai', baseUrl: 'http://127.0.0.1:9', model: 'm' }] }
  })

  it('uses the subjects of docs/nats.md by default', () => {
    const subjects = natsSubjects()

    expect(subjects.start).toBe(Subjects.start)
    expect(subjects.events('r1')).toBe(Subjects.events('r1'))
    expect(subjects.done('r1')).toBe(Subjects.done('r1'))
    expect(subjects.control('r1', 'approve')).toBe(Subjects.control('r1', 'approve'))
    expect(subjects.anyControl).toBe(Subjects.anyControl)
  })

  it('drops malformed child run requests for good and goes on delivering', async () => {
    const { bus, raw, options, within } = await setup()
    const seen: ChildDelivery[] = []
    await within(bus.consumeChildren((delivery) => Effect.sync(() => seen.push(delivery)).pipe(Effect.zipRight(delivery.ack)), { concurrency: 2 }))
    const js = jetstream(raw)
    const start = natsSubjects(options.subjectPrefix).start
    await js.publish(start, 'not json')
    await js.publish(start, JSON.stringify({ v: PROTOCOL_VERSION, runId: 42 }))
    await js.publish(start, JSON.stringify({ ...request('no-version'), v: undefined }))
    const valid = `valid-${randomUUID()}`
    await js.publish(start, JSON.stringify(request(valid)), { msgID: valid })
    await waitFor(() => seen[0], 'the valid request')
    const jsm = await jetstreamManager(raw)
    // A dropped request is gone from the work queue, not waiting for a redelivery.
    await waitFor(async () => ((await jsm.streams.info(options.streamName)).state.messages === 0 ? true : undefined), 'an empty queue')

    expect(seen.map((d) => d.request.runId)).toEqual([valid])
  })

  it('ignores malformed done and event messages', async () => {
    const { bus, raw, options, within } = await setup()
    const subjects = natsSubjects(options.subjectPrefix)
    const runId = randomUUID()
    const done: unknown[] = []
    const events: unknown[] = []
    await within(bus.watchDone((message) => done.push(message)))
    await within(bus.watchEvents(runId, (message) => events.push(message)))
    raw.publish(subjects.done(runId), 'not json')
    raw.publish(subjects.done(runId), JSON.stringify({ v: PROTOCOL_VERSION, runId, status: 'succeeded' }))
    raw.publish(subjects.events(runId), new Uint8Array([0xff, 0x00]))
    const valid = { v: PROTOCOL_VERSION, runId, status: 'failed', steps: 1 }
    const event = { v: PROTOCOL_VERSION, runId, seq: 1, from: 'a', event: 'E', to: 'b', at: new Date().toISOString() }
    raw.publish(subjects.done(runId), JSON.stringify(valid))
    raw.publish(subjects.events(runId), JSON.stringify(event))
    await waitFor(() => (done.length > 0 && events.length > 0 ? true : undefined), 'the valid messages')

    expect(done).toEqual([valid])
    expect(events).toEqual([event])
  })

  it('names the server in a one-line error when it cannot connect', async () => {
    const scope = await run(Scope.make())
    cleanups.push(() => run(Scope.close(scope, Exit.void)))
    const error = await run(Effect.flip(Scope.extend(makeNatsBus({ servers: 'nats://127.0.0.1:1' }), scope)))

    expect(error._tag).toBe('BusError')
    expect(error.message).toContain('nats://127.0.0.1:1')
    expect(error.message).not.toContain('\n')
  })

  it('names the credentials file it cannot read', async () => {
    const scope = await run(Scope.make())
    cleanups.push(() => run(Scope.close(scope, Exit.void)))
    const error = await run(Effect.flip(Scope.extend(makeNatsBus({ servers: natsUrl, credsFile: '/nonexistent/user.creds' }), scope)))

    expect(error.message).toMatch(/^cannot read NATS credentials file \/nonexistent\/user\.creds: /)
  })

  it('refuses a run id that cannot be a subject token instead of sending elsewhere', async () => {
    const { bus } = await setup()
    const error = await run(Effect.flip(bus.control('a.b', 'status', {})))

    expect(error.message).toMatch(/cannot be a NATS subject token/)
  })

  it('reads its options from --nats and the environment, and is absent without a URL', () => {
    const env = {
      AGENTVISOR_NATS_URL: 'nats://env:4222',
      AGENTVISOR_NATS_TOKEN: 's3cret',
      AGENTVISOR_NATS_USER: 'ann',
      AGENTVISOR_NATS_PASS: 'pw',
      AGENTVISOR_NATS_CREDS: '/etc/nats/user.creds',
      AGENTVISOR_NATS_TLS_CA: '/etc/nats/ca.pem'
    }

    expect(natsBusOptionsFromEnv({}, {})).toBeUndefined()
    expect(natsBusOptionsFromEnv({ nats: 'nats://a:4222, nats://b:4222' }, env)).toMatchObject({
      servers: ['nats://a:4222', 'nats://b:4222'],
      token: 's3cret',
      user: 'ann',
      pass: 'pw',
      credsFile: '/etc/nats/user.creds',
      tls: { caFile: '/etc/nats/ca.pem' }
    })
    expect(natsBusOptionsFromEnv({}, { AGENTVISOR_NATS_URL: 'nats://env:4222' })).toEqual({
      servers: 'nats://env:4222',
      token: undefined,
      user: undefined,
      pass: undefined,
      credsFile: undefined,
      tls: undefined
    })
  })
})
