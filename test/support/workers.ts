import type { ChildProcess } from 'node:child_process'
import { spawnTethered } from '@agentvisor/cli'
import { afterEach, inject } from 'vitest'
import { BIN, waitFor } from './cli.js'

/** Environment giving a test its own NATS stream and consumer, so queued messages never cross tests. */
export const natsEnv = (): Record<string, string> => {
  const suffix = Math.random().toString(36).slice(2, 8)
  return {
    AGENTVISOR_NATS_URL: inject('natsUrl'),
    AGENTVISOR_NATS_PREFIX: `avtest${suffix}`,
    AGENTVISOR_NATS_STREAM: `AV_TEST_${suffix}`,
    AGENTVISOR_NATS_CONSUMER: `av-workers-${suffix}`,
    AGENTVISOR_NATS_ACK_WAIT_MS: '2000'
  }
}

export interface Worker {
  readonly child: ChildProcess
  /** What it wrote on stderr so far (one line per run it starts and ends). */
  readonly log: () => string
}

/**
 * `agentvisor worker` processes for a test file, each stopped (SIGTERM, then awaited) after
 * each test: called once at the top of the file, it gives the function that starts one.
 */
export const workersPerTest = (): ((db: string, env: Record<string, string>, extraArgs?: ReadonlyArray<string>) => Worker) => {
  const workers: Worker[] = []
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      if (w.child.exitCode === null && w.child.signalCode === null) {
        const exited = new Promise((r) => w.child.once('exit', r))
        w.child.kill('SIGTERM')
        await exited
      }
    }
  })
  return (db, env, extraArgs = []) => {
    // Tethered: a worker ends with the test process, even a killed one.
    const child = spawnTethered(process.execPath, [BIN, 'worker', '--db', db, '--concurrency', '1', ...extraArgs], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
      watchesTether: true
    })
    let log = ''
    child.stderr!.on('data', (d: Buffer) => (log += d.toString()))
    const worker = { child, log: () => log }
    workers.push(worker)
    return worker
  }
}

/** Waits until every one of `workers` serves. */
export const serving = (workers: ReadonlyArray<Worker>): Promise<true> =>
  waitFor(() => (workers.every((w) => w.log().includes('serving')) ? true : undefined), `${workers.length} worker(s) serving`)
