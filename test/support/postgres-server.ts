import { spawnTethered, type TetheredSpawnOptions } from '@agentvisor/cli'
import { startPostgresServer as startServer } from '../../scripts/postgres-server.mjs'

/** A real PostgreSQL server of the caller's own, which it may stop and start again. */
export interface PostgresServer {
  /** A superuser URL of its `postgres` database. */
  readonly url: string
  /**
   * Stops the server (SIGINT, PostgreSQL's fast shutdown: clients are disconnected, not waited
   * for) and resolves once its process has exited; its data stays.
   */
  readonly stop: () => Promise<void>
  /** Starts it again on the same port and data, resolving once it accepts connections. */
  readonly start: () => Promise<void>
  /** Stops it (if running) and deletes its folder. */
  readonly remove: () => Promise<void>
}

/**
 * Starts a real PostgreSQL (scripts/postgres-server.mjs, which the bench starts too): a fresh
 * cluster in a temporary folder on a random 127.0.0.1 port, its collation ICU `en-US` like a
 * typical production database, fsync off. Tethered: it ends with the test run, even a killed one
 * (docs/cli.md, "Ending with the parent"). The test run's server (test/setup/postgres.ts) is one;
 * a test that stops its store mid-run starts one of its own, so that other tests' server stays up.
 */
export const startPostgresServer = async (options: { readonly maxConnections?: number } = {}): Promise<PostgresServer> => {
  const server = await startServer({
    ...options,
    spawn: (command, args, spawnOptions) => spawnTethered(command, args, spawnOptions as TetheredSpawnOptions)
  })
  return { url: server.url(), stop: server.stop, start: server.start, remove: server.remove }
}
