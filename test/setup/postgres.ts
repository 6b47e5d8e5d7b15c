import type { TestProject } from 'vitest/node'
import { type PostgresServer, startPostgresServer } from '../support/postgres-server.js'

declare module 'vitest' {
  export interface ProvidedContext {
    /** A superuser URL of the test run's PostgreSQL (its `postgres` database). */
    pgUrl: string
  }
}

let server: PostgresServer | undefined

/**
 * Starts one real PostgreSQL for the whole test run (test/support/postgres-server.ts) and stops
 * it by its PID afterwards. A missing PostgreSQL fails the run; nothing skips.
 */
export async function setup(project: TestProject): Promise<void> {
  // Every test file opens pools of its own; the lease race opens a pool per simulated host.
  server = await startPostgresServer({ maxConnections: 400 })
  project.provide('pgUrl', server.url)
}

export async function teardown(): Promise<void> {
  await server?.remove()
}
