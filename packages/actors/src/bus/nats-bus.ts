import { readFileSync } from 'node:fs'
import type { NatsConnection, NodeConnectionOptions } from '@nats-io/transport-node'
import { connect, credsAuthenticator } from '@nats-io/transport-node'
import { maskUrlCredentials } from '@agentvisor/core'
import type { Scope } from 'effect'
import { Effect } from 'effect'
import type { Bus } from '../protocol/bus.js'
import { BusError } from '../protocol/bus.js'
import { makeNatsBroadcasts } from './nats-broadcasts.js'
import { makeNatsRequests } from './nats-requests.js'
import { DEFAULT_SUBJECT_PREFIX, natsSubjects } from './nats-subjects.js'
import { natsUrlAuth } from './nats-url-auth.js'
import { firstLine, makeNatsWorkQueue } from './nats-work-queue.js'

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

const makeBus = (nc: NatsConnection, options: NatsBusOptions): Bus => {
  const subjects = natsSubjects(options.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX)
  const consumerName = options.consumerName ?? DEFAULT_CONSUMER
  return {
    kind: 'nats',
    ...makeNatsWorkQueue(nc, {
      streamName: options.streamName ?? DEFAULT_STREAM,
      consumerName,
      subject: subjects.start,
      ackWaitMs: options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS
    }),
    ...makeNatsBroadcasts(nc, subjects),
    // Control and submit share the work queue's consumer name as their queue group.
    ...makeNatsRequests(nc, subjects, consumerName)
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
