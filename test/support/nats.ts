import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { type NatsBusOptions, natsBusOptionsFromEnv } from '@agentvisor/actors'
import { spawnTethered } from '@agentvisor/cli'
import { jetstreamManager } from '@nats-io/jetstream'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { afterAll, afterEach, beforeAll } from 'vitest'
import { waitFor } from './cli.js'
import { accepts, freePort } from './free-port.js'
import { natsEnv, serving, type Worker, workersPerTest } from './workers.js'

/** A real nats-server on a free 127.0.0.1 port. */
export interface NatsServer {
  readonly url: string
  /** What it wrote on stderr so far. */
  readonly log: () => string
  /** Stops it (SIGTERM, then awaited) and removes its store folder. */
  readonly stop: () => Promise<void>
}

/**
 * Starts a nats-server of the caller's own: JetStream on (its store in a temporary folder)
 * unless `jetstream: false`, `args` after the defaults (a `-c` file...), `env` for its
 * variables. Tethered: it ends with the test process, even a killed one (docs/cli.md, "Ending
 * with the parent"). A missing or failing server is an error, with its last words.
 */
export const startNatsServer = async (
  options: { readonly jetstream?: boolean; readonly args?: ReadonlyArray<string>; readonly env?: NodeJS.ProcessEnv } = {},
  attempt = 1
): Promise<NatsServer> => {
  const port = await freePort()
  const storeDir = options.jetstream === false ? undefined : mkdtempSync(path.join(tmpdir(), 'agentvisor-nats-'))
  const args = ['-a', '127.0.0.1', '-p', String(port), ...(storeDir === undefined ? [] : ['-js', '-sd', storeDir]), ...(options.args ?? [])]
  const child = spawnTethered('nats-server', args, { env: { ...process.env, ...options.env }, stdio: ['ignore', 'ignore', 'pipe'] })
  let log = ''
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()))
  let failure: string | undefined
  child.once('error', (error) => (failure = `cannot start nats-server (is it installed?): ${error.message}`))
  const stop = async () => {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r))
      process.kill(child.pid, 'SIGTERM')
      await exited
    }
    if (storeDir !== undefined) rmSync(storeDir, { recursive: true, force: true })
  }
  const up = await waitFor(
    async () => (failure !== undefined || child.exitCode !== null ? 'exited' : (await accepts(port)) ? 'up' : undefined),
    `nats-server on 127.0.0.1:${port}`
  )
  if (up === 'exited') {
    await stop()
    // The free port can be taken by another process before the server binds it: try another.
    if (attempt < 3 && log.includes('address already in use')) return startNatsServer(options, attempt + 1)
    throw new Error(failure ?? `nats-server exited at start: ${log.trim().split('\n').at(-1)}`)
  }
  return { url: `nats://127.0.0.1:${port}`, log: () => log, stop }
}

/**
 * One test's world on a NATS server: its own subjects, stream and consumer (`env`, for agentvisor
 * processes), worker processes on them, plain NATS connections. All of it ends after the test:
 * workers stopped, connections closed, the stream deleted.
 */
export interface NatsWorld {
  /** AGENTVISOR_NATS_* for this test (natsEnv of support/workers.ts). */
  readonly env: Record<string, string>
  /** The server's URL. */
  readonly url: string
  /** The subjects' prefix. */
  readonly prefix: string
  /** Starts `agentvisor worker --db DB` on this world's queue (`extraEnv` over its environment). */
  readonly worker: (db: string, extraArgs?: ReadonlyArray<string>, extraEnv?: Record<string, string>) => Worker
  /** Starts `count` workers and waits until each serves. */
  readonly serving: (db: string, count?: number, extraArgs?: ReadonlyArray<string>) => Promise<Worker[]>
  /** A plain NATS connection to the server (what a service in any language has). */
  readonly connect: () => Promise<NatsConnection>
  /** Options of an in-process bus (makeNatsBus) on this world, `ackWaitMs` over its own. */
  readonly busOptions: (ackWaitMs?: number) => NatsBusOptions & { readonly streamName: string; readonly subjectPrefix: string }
}

/**
 * Called once at the top of a test file: gives the function that makes a test's world. By
 * default each world is on the test run's server (test/setup/nats-server.ts) under subjects,
 * stream and consumer of its own. `defaultSubjects: true` gives each the defaults of
 * docs/nats.md instead (`agentvisor.*`, what a service in another language talks to), on a
 * nats-server of the file's own, so no other file's workers share its queue.
 */
export const natsWorldPerTest = (options: { readonly defaultSubjects?: boolean } = {}): (() => NatsWorld) => {
  const connections: NatsConnection[] = []
  const streams: Array<{ readonly url: string; readonly name: string }> = []
  let own: NatsServer | undefined
  if (options.defaultSubjects === true) {
    beforeAll(async () => {
      own = await startNatsServer()
    })
    afterAll(async () => {
      await own?.stop()
    })
  }
  // Registered before the workers' hook, so it runs after it (vitest runs after-hooks as a stack):
  // no worker consumes the stream by the time it is deleted.
  afterEach(async () => {
    for (const nc of connections.splice(0)) await nc.close()
    const gone = streams.splice(0)
    if (gone.length === 0) return
    const nc = await connect({ servers: gone[0]!.url })
    try {
      const jsm = await jetstreamManager(nc)
      // A test that never started a worker has no stream: nothing to delete.
      for (const stream of gone) await jsm.streams.delete(stream.name).catch(() => false)
    } finally {
      await nc.close()
    }
  })
  const startWorker = workersPerTest()
  return () => {
    const env = own === undefined ? natsEnv() : { AGENTVISOR_NATS_URL: own.url }
    const url = env['AGENTVISOR_NATS_URL']!
    const stream = env['AGENTVISOR_NATS_STREAM'] ?? DEFAULT_STREAM
    const prefix = env['AGENTVISOR_NATS_PREFIX'] ?? 'agentvisor'
    streams.push({ url, name: stream })
    const worker = (db: string, extraArgs: ReadonlyArray<string> = [], extraEnv: Record<string, string> = {}) =>
      startWorker(db, { ...env, ...extraEnv }, extraArgs)
    return {
      env,
      url,
      prefix,
      worker,
      serving: async (db, count = 1, extraArgs = []) => {
        const started = Array.from({ length: count }, () => worker(db, extraArgs))
        await serving(started)
        return started
      },
      connect: async () => {
        const nc = await connect({ servers: url })
        connections.push(nc)
        return nc
      },
      busOptions: (ackWaitMs) => ({
        ...natsBusOptionsFromEnv({}, env)!,
        ...(ackWaitMs === undefined ? {} : { ackWaitMs }),
        streamName: stream,
        subjectPrefix: prefix
      })
    }
  }
}

/** The stream a worker makes without AGENTVISOR_NATS_STREAM (docs/nats.md). */
const DEFAULT_STREAM = 'AGENTVISOR_RUNS'
