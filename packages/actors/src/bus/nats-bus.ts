import { readFileSync } from 'node:fs'
import type { Msg, NatsConnection, NodeConnectionOptions, Subscription } from '@nats-io/transport-node'
import { connect, credsAuthenticator, RequestError, TimeoutError } from '@nats-io/transport-node'
import { maskUrlCredentials } from '@agentvisor/core'
import type { Scope } from 'effect'
import { Effect, FiberSet } from 'effect'
import type { Bus } from '../protocol/bus.js'
import { BusError, NO_SUBMIT_RESPONDERS } from '../protocol/bus.js'
import { answerControl, answerSubmit, encodeControlReply } from './control-answer.js'
import type { RunStreamEvent } from '../protocol/run-stream-event.js'
import {
  type ControlReply,
  PROTOCOL_VERSION,
  type RunDoneMessage,
  type RunEventMessage,
  type RunRequestMessage,
  type RunStartedMessage
} from '../protocol/messages.js'
import { controlTarget, DEFAULT_SUBJECT_PREFIX, isSubjectToken, natsSubjects } from './nats-subjects.js'
import { natsUrlAuth } from './nats-url-auth.js'
import { firstLine, makeNatsWorkQueue } from './nats-work-queue.js'
import { stderrLog } from '../loop/survive.js'
import { bytesToText, decodeControlReply, decodeRunDone, decodeRunEvent, decodeStreamEvent, decodeVersioned, encodeControlBody, encodeJson } from './wire.js'

/** How to reach NATS and where the bus keeps its queue (docs/nats.md). */
export interface NatsBusOptions {
  /** One server URL, or several (a cluster), e.g. `nats://127.0.0.1:4222`. */
  readonly servers: string | readonly string[]
  readonly token?: string | undefined
  readonly user?: string | undefined
  readonly pass?: string | undefined
  /** A `.creds` file (JWT and NKey seed), read at connect time. */
  readonly credsFile?: string | undefined
  readonly tls?: { readonly caFile?: string | undefined; readonly certFile?: string | undefined; readonly keyFile?: string | undefined } | undefined
  /** The connection's name in the server's monitoring pages. */
  readonly name?: string | undefined
  /** How long a child-run delivery may go unacked before another worker gets it (default 30000). */
  readonly ackWaitMs?: number | undefined
  /** The JetStream work-queue stream of child-run requests (default `AGENTVISOR_RUNS`). */
  readonly streamName?: string | undefined
  /** The durable consumer every worker shares, also the queue group of control (default `agentvisor-workers`). */
  readonly consumerName?: string | undefined
  /** The first subject token (default `agentvisor`); separates installations sharing one NATS account. */
  readonly subjectPrefix?: string | undefined
}

const DEFAULT_ACK_WAIT_MS = 30_000
const DEFAULT_STREAM = 'AGENTVISOR_RUNS'
const DEFAULT_CONSUMER = 'agentvisor-workers'
const DEFAULT_CONTROL_TIMEOUT_MS = 5_000

const nonEmpty = (value: string | undefined): string | undefined => (value === undefined || value.trim() === '' ? undefined : value.trim())

/**
 * The NATS options of a command line: `--nats` or `AGENTVISOR_NATS_URL` (comma-separated for a
 * cluster), with `AGENTVISOR_NATS_TOKEN`, `_USER`/`_PASS`, `_CREDS` and `_TLS_CA`/`_CERT`/`_KEY`,
 * and `_PREFIX` (subjects), `_STREAM`, `_CONSUMER`, `_ACK_WAIT_MS` (the work queue).
 * `undefined` when no URL is given: the embedded in-process bus is used.
 *
 * @example
 * const nats = natsBusOptionsFromEnv({ nats: values.nats })
 */
/**
 * Why a NATS server address cannot be one: the client speaks NATS (`nats://`, `tls://`, or a
 * bare `host:port`); an `http://` URL or another scheme is a mistake to say at once, not a
 * connection that never comes (docs/nats.md). Undefined when every server is fine.
 */
export const invalidNatsServers = (servers: string | ReadonlyArray<string>): string | undefined => {
  for (const server of [servers].flat()) {
    const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(server)?.[1]?.toLowerCase()
    if (scheme !== undefined && scheme !== 'nats' && scheme !== 'tls') {
      return `${maskUrlCredentials(server)} is not a NATS server address: use nats://host:4222 (or tls://)`
    }
  }
  return undefined
}

export const natsBusOptionsFromEnv = (flags: { readonly nats?: string | undefined }, env: NodeJS.ProcessEnv = process.env): NatsBusOptions | undefined => {
  const url = nonEmpty(flags.nats) ?? nonEmpty(env['AGENTVISOR_NATS_URL'])
  if (url === undefined) return undefined
  const servers = url
    .split(',')
    .map((server) => server.trim())
    .filter((server) => server !== '')
  const tls = {
    caFile: nonEmpty(env['AGENTVISOR_NATS_TLS_CA']),
    certFile: nonEmpty(env['AGENTVISOR_NATS_TLS_CERT']),
    keyFile: nonEmpty(env['AGENTVISOR_NATS_TLS_KEY'])
  }
  const anyTls = tls.caFile !== undefined || tls.certFile !== undefined || tls.keyFile !== undefined
  return {
    servers: servers.length === 1 ? (servers[0] ?? url) : servers,
    token: nonEmpty(env['AGENTVISOR_NATS_TOKEN']),
    user: nonEmpty(env['AGENTVISOR_NATS_USER']),
    pass: env['AGENTVISOR_NATS_PASS'] === '' ? undefined : env['AGENTVISOR_NATS_PASS'],
    credsFile: nonEmpty(env['AGENTVISOR_NATS_CREDS']),
    tls: anyTls ? tls : undefined,
    // Namespacing: several installations (or parallel test runs) sharing one NATS server.
    subjectPrefix: nonEmpty(env['AGENTVISOR_NATS_PREFIX']),
    streamName: nonEmpty(env['AGENTVISOR_NATS_STREAM']),
    consumerName: nonEmpty(env['AGENTVISOR_NATS_CONSUMER']),
    ackWaitMs: positive(env['AGENTVISOR_NATS_ACK_WAIT_MS'])
  }
}

const positive = (value: string | undefined): number | undefined => {
  const n = Number(nonEmpty(value))
  return Number.isInteger(n) && n > 0 ? n : undefined
}

/** The servers as messages name them: credentials in a URL shown as `***` (docs/nats.md). */
export const serverList = (servers: string | readonly string[]): string => maskUrlCredentials(typeof servers === 'string' ? servers : servers.join(','))

const connectionOptions = (options: NatsBusOptions): Effect.Effect<NodeConnectionOptions, BusError> =>
  Effect.try({
    try: (): NodeConnectionOptions => {
      const tls = options.tls
      const fromUrl = natsUrlAuth(options.servers)
      // Credentials set explicitly win over those written into a URL.
      const explicit = options.token !== undefined || options.user !== undefined || options.pass !== undefined || options.credsFile !== undefined
      const token = explicit ? options.token : fromUrl.token
      const user = explicit ? options.user : fromUrl.user
      const pass = explicit ? options.pass : fromUrl.pass
      return {
        servers: [...fromUrl.servers],
        ...(options.name !== undefined ? { name: options.name } : {}),
        ...(token !== undefined ? { token } : {}),
        ...(user !== undefined ? { user } : {}),
        ...(pass !== undefined ? { pass } : {}),
        ...(options.credsFile !== undefined ? { authenticator: credsAuthenticator(new Uint8Array(readFileSync(options.credsFile))) } : {}),
        ...(tls !== undefined
          ? {
              tls: {
                ...(tls.caFile !== undefined ? { caFile: tls.caFile } : {}),
                ...(tls.certFile !== undefined ? { certFile: tls.certFile } : {}),
                ...(tls.keyFile !== undefined ? { keyFile: tls.keyFile } : {})
              }
            }
          : {}),
        // A worker outlives a NATS restart: it keeps reconnecting instead of giving up after ten tries.
        maxReconnectAttempts: -1
      }
    },
    catch: (cause) => new BusError({ message: `cannot read NATS credentials file ${options.credsFile}: ${firstLine(cause)}`, cause })
  })

const validToken = (what: string, token: string): Effect.Effect<void, BusError> =>
  isSubjectToken(token) ? Effect.void : Effect.fail(new BusError({ message: `${what} ${JSON.stringify(token)} cannot be a NATS subject token` }))

// A subscription's interest must reach the server before `watch*` returns, or a message
// published right after (by another connection) could miss it.
const subscribed = (nc: NatsConnection, subscribe: () => Subscription): Effect.Effect<void, BusError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({ try: subscribe, catch: (cause) => new BusError({ message: `cannot subscribe: ${firstLine(cause)}`, cause }) }),
    (subscription) =>
      Effect.sync(() => {
        try {
          subscription.unsubscribe()
        } catch {
          // The connection is already closed, and the subscription with it.
        }
      })
  ).pipe(
    Effect.zipLeft(Effect.tryPromise({ try: () => nc.flush(), catch: (cause) => new BusError({ message: `cannot subscribe: ${firstLine(cause)}`, cause }) }))
  )

const publish = (nc: NatsConnection, subject: string, message: unknown): Effect.Effect<void> =>
  Effect.sync(() => {
    const payload = encodeJson(message)
    if (payload === undefined) return
    try {
      nc.publish(subject, payload)
    } catch {
      // Best effort: a run never fails because the bus is down.
    }
  })

const isTimeout = (cause: unknown): boolean => cause instanceof TimeoutError || (cause instanceof RequestError && cause.cause instanceof TimeoutError)

const respond = (msg: Msg, reply: ControlReply): Effect.Effect<void> =>
  Effect.sync(() => {
    try {
      msg.respond(encodeControlReply(reply))
    } catch {
      // The connection closed while answering; the requester times out.
    }
  })

const makeBus = (nc: NatsConnection, options: NatsBusOptions): Bus => {
  const subjects = natsSubjects(options.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX)
  const consumerName = options.consumerName ?? DEFAULT_CONSUMER
  const queue = makeNatsWorkQueue(nc, {
    streamName: options.streamName ?? DEFAULT_STREAM,
    consumerName,
    subject: subjects.start,
    ackWaitMs: options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS
  })

  const publishEvent: Bus['publishEvent'] = (message) => (isSubjectToken(message.runId) ? publish(nc, subjects.events(message.runId), message) : Effect.void)

  // A stream event is the event itself with the protocol version (docs/streaming.md).
  const publishStream: Bus['publishStream'] = (runId, event) =>
    isSubjectToken(runId) ? publish(nc, subjects.stream(runId), { v: PROTOCOL_VERSION, ...event }) : Effect.void

  const watchStream: Bus['watchStream'] = (runId, onEvent) =>
    validToken('run id', runId).pipe(
      Effect.zipRight(
        subscribed(nc, () =>
          nc.subscribe(subjects.stream(runId), {
            callback: listen<RunStreamEvent>(decodeStreamEvent, (event) => {
              if (event.runId === runId) onEvent(event)
            })
          })
        )
      )
    )

  const publishStarted: Bus['publishStarted'] = (message) =>
    isSubjectToken(message.runId) ? publish(nc, subjects.started(message.runId), message) : Effect.void

  const watchStarted: Bus['watchStarted'] = (onStarted) =>
    subscribed(nc, () =>
      nc.subscribe(subjects.anyStarted, { callback: listen<RunStartedMessage>(decodeVersioned<RunStartedMessage>(['runId', 'goal']), onStarted) })
    )

  const publishRequest: Bus['publishRequest'] = (message) => publish(nc, subjects.requests, message)

  const watchRequests: Bus['watchRequests'] = (onRequest) =>
    subscribed(nc, () =>
      nc.subscribe(subjects.requests, { callback: listen<RunRequestMessage>(decodeVersioned<RunRequestMessage>(['runId', 'rootId']), onRequest) })
    )

  const publishDone: Bus['publishDone'] = (message) => (isSubjectToken(message.runId) ? publish(nc, subjects.done(message.runId), message) : Effect.void)

  const listen =
    <A>(decode: (text: string) => A | undefined, deliver: (message: A) => void) =>
    (error: Error | null, msg: Msg): void => {
      if (error !== null) return
      const message = decode(bytesToText(msg.data))
      if (message === undefined) return
      try {
        deliver(message)
      } catch {
        // A listener that throws must not end the subscription.
      }
    }

  const watchDone: Bus['watchDone'] = (onDone) =>
    subscribed(nc, () => nc.subscribe(subjects.anyDone, { callback: listen<RunDoneMessage>(decodeRunDone, onDone) }))

  const watchEvents: Bus['watchEvents'] = (runId, onEvent) =>
    validToken('run id', runId).pipe(
      Effect.zipRight(
        subscribed(nc, () =>
          nc.subscribe(subjects.events(runId), {
            callback: listen<RunEventMessage>(decodeRunEvent, (message) => {
              if (message.runId === runId) onEvent(message)
            })
          })
        )
      )
    )

  const serveControl: Bus['serveControl'] = (handler, serveOptions) =>
    Effect.gen(function* () {
      const log = serveOptions?.log ?? stderrLog
      // Registered before the subscription, so released after it: no request is taken once
      // the answers in progress are being interrupted.
      const run = yield* FiberSet.makeRuntime<never, void, never>()
      const onRequest = (error: Error | null, msg: Msg): void => {
        if (error !== null) {
          log(`control subscription: ${firstLine(error)}`)
          return
        }
        const { runId, verb } = controlTarget(msg.subject)
        run(answerControl(handler, runId, verb, bytesToText(msg.data), log).pipe(Effect.flatMap((reply) => respond(msg, reply))))
      }
      const own = serveOptions?.runId
      if (own !== undefined) {
        yield* validToken('run id', own)
        yield* subscribed(nc, () => nc.subscribe(subjects.control(own, '*'), { callback: onRequest }))
        return
      }
      // The queue group makes each request go to one worker, not all of them.
      yield* subscribed(nc, () => nc.subscribe(subjects.anyControl, { queue: consumerName, callback: onRequest }))
    })

  const serveSubmit: Bus['serveSubmit'] = (handler, serveOptions) =>
    Effect.gen(function* () {
      const log = serveOptions?.log ?? stderrLog
      const run = yield* FiberSet.makeRuntime<never, void, never>()
      // In the workers' queue group: each submission is taken by one worker.
      yield* subscribed(nc, () =>
        nc.subscribe(subjects.submit, {
          queue: consumerName,
          callback: (error, msg) => {
            if (error !== null) return log(`submit subscription: ${firstLine(error)}`)
            run(answerSubmit(handler, bytesToText(msg.data), log).pipe(Effect.flatMap((reply) => respond(msg, reply))))
          }
        })
      )
    })

  /**
   * One request/reply of the control API or of submit: the body encoded, the reply decoded, and
   * a failure said in one line (`what` names the request in it; `noResponders` is what nobody
   * serving it says).
   */
  const ask = (subject: string, body: unknown, timeoutMs: number, what: string, noResponders: string): Effect.Effect<ControlReply, BusError> =>
    Effect.gen(function* () {
      const payload = yield* encodeControlBody(body)
      const reply = yield* Effect.tryPromise({
        try: () => nc.request(subject, payload, { timeout: timeoutMs }),
        catch: (cause) =>
          new BusError({
            message:
              cause instanceof RequestError && cause.isNoResponders()
                ? noResponders
                : isTimeout(cause)
                  ? `${what} timed out after ${timeoutMs}ms`
                  : `${what} failed: ${firstLine(cause)}`,
            cause
          })
      })
      return yield* decodeControlReply(bytesToText(reply.data))
    })

  const submit: Bus['submit'] = (body, timeoutMs = DEFAULT_CONTROL_TIMEOUT_MS) => ask(subjects.submit, body, timeoutMs, 'submit', NO_SUBMIT_RESPONDERS)

  const control: Bus['control'] = (runId, verb, body, timeoutMs = DEFAULT_CONTROL_TIMEOUT_MS) =>
    Effect.gen(function* () {
      yield* validToken('run id', runId)
      yield* validToken('control verb', verb)
      const subject = subjects.control(runId, verb)
      return yield* ask(subject, body, timeoutMs, `control ${verb} of run ${runId}`, `no responders for ${subject}`)
    })

  return {
    kind: 'nats',
    submitChild: queue.submit,
    consumeChildren: queue.consume,
    checkWorkQueue: queue.check,
    publishEvent,
    publishStream,
    watchStream,
    publishStarted,
    watchStarted,
    publishRequest,
    watchRequests,
    publishDone,
    watchDone,
    watchEvents,
    serveControl,
    control,
    serveSubmit,
    submit
  }
}

/**
 * Connects to NATS and returns the bus over it: child runs on a JetStream work queue, events
 * and results on plain subjects, control by request/reply (docs/nats.md). The connection
 * closes with the scope.
 *
 * @example
 * const bus = yield* makeNatsBus({ servers: 'nats://127.0.0.1:4222' })
 */
export const makeNatsBus = (options: NatsBusOptions): Effect.Effect<Bus, BusError, Scope.Scope> =>
  Effect.gen(function* () {
    const connection = yield* connectionOptions(options)
    const nc = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => connect(connection),
        catch: (cause) => new BusError({ message: `cannot connect to NATS at ${serverList(options.servers)}: ${firstLine(cause)}`, cause })
      }),
      // A connection that cannot close cleanly is closed as far as this process is concerned.
      (nc) => Effect.ignore(Effect.tryPromise(() => nc.close()))
    )
    return makeBus(nc, options)
  })
