import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import type { TestProject } from 'vitest/node'
import { spawnTethered } from '@agentvisor/cli'
import { accepts, freePort } from '../support/free-port.js'

declare module 'vitest' {
  export interface ProvidedContext {
    natsUrl: string
  }
}

let server: ChildProcess | undefined
let storeDir: string | undefined

/**
 * Starts one real nats-server (JetStream on, loopback, a random port, a temporary store folder)
 * for the whole test run, and stops it by its PID afterwards. A missing server fails the run.
 */
export async function setup(project: TestProject): Promise<void> {
  const port = await freePort()
  storeDir = mkdtempSync(path.join(tmpdir(), 'agentvisor-nats-'))
  // Tethered: it ends with the test run, even a killed one (docs/cli.md, "Ending with the parent").
  const child = spawnTethered('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir])
  server = child
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (error) => reject(new Error(`cannot start nats-server (is it installed?): ${error.message}`)))
    child.once('exit', (code) => reject(new Error(`nats-server exited early with code ${code}`)))
  })
  const ready = (async () => {
    for (let i = 0; i < 200; i++) {
      if (await accepts(port)) return
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error(`nats-server did not accept connections on 127.0.0.1:${port}`)
  })()
  await Promise.race([ready, failed])
  project.provide('natsUrl', `nats://127.0.0.1:${port}`)
}

export async function teardown(): Promise<void> {
  if (server?.pid !== undefined && server.exitCode === null) {
    const exited = new Promise((r) => server!.once('exit', r))
    process.kill(server.pid, 'SIGTERM')
    await exited
  }
  if (storeDir !== undefined) rmSync(storeDir, { recursive: true, force: true })
}
