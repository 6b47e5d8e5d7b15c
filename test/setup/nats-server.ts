import type { TestProject } from 'vitest/node'
import { type NatsServer, startNatsServer } from '../support/nats.js'

declare module 'vitest' {
  export interface ProvidedContext {
    natsUrl: string
  }
}

let server: NatsServer | undefined

/**
 * Starts one real nats-server (JetStream on, loopback, a random port, a temporary store folder)
 * for the whole test run (test/support/nats.ts), and stops it afterwards. A missing server fails
 * the run.
 */
export async function setup(project: TestProject): Promise<void> {
  server = await startNatsServer()
  project.provide('natsUrl', server.url)
}

export async function teardown(): Promise<void> {
  await server?.stop()
}
