import type { Pool, PoolConfig } from 'pg'

/** Type OIDs whose text `pg` leaves as strings: `bigint` (COUNT, epoch ms) and `numeric` (SUM). */
const INT8_OID = 20
const NUMERIC_OID = 1700

/** How long opening a connection may take when the URL sets no `connect_timeout`. */
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000

/**
 * A `pg` pool for the store at `url`.
 *
 * `bigint` and `numeric` values come back as JS numbers, as SQLite gives them: the store keeps
 * epoch milliseconds and fencing tokens in `bigint` columns and counts with COUNT (a `bigint`),
 * all far below 2^53. The parsers are this pool's own (`types`), never `pg.types.setTypeParser`,
 * which would change every other `pg` user in the process.
 *
 * `pg` is imported here, on first use, so a SQLite-only process (the CLI's cold start) never
 * loads it.
 */
export async function createPostgresPool(url: string): Promise<Pool> {
  const { default: pg } = await import('pg')
  const toNumber = (text: string): number => Number(text)
  const getTypeParser = ((oid: number, format?: 'text' | 'binary') =>
    (oid === INT8_OID || oid === NUMERIC_OID) && format !== 'binary' ? toNumber : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser
  const config: PoolConfig = {
    connectionString: url,
    types: { getTypeParser },
    connectionTimeoutMillis: connectTimeoutMs(url) ?? DEFAULT_CONNECT_TIMEOUT_MS
  }
  const pool = new pg.Pool(config)
  // A connection the server drops (a restart, a failover, an admin's pg_terminate_backend) emits
  // 'error'; with no listener that is an uncaught exception and the process dies. `pg` listens
  // only while a connection is idle in the pool (the pool's 'error'), not while it is checked
  // out, as it is for a whole Kysely transaction, between its statements. Either way the next
  // query on that connection rejects (and the transaction with it) and the pool discards it, so
  // there is nothing more to do here.
  pool.on('error', ignore)
  pool.on('connect', (client) => client.on('error', ignore))
  return pool
}

const ignore = (): void => {}

/** libpq's `connect_timeout` (seconds) from the URL, which `pg` itself does not apply. */
function connectTimeoutMs(url: string): number | undefined {
  const match = /[?&]connect_timeout=(\d+)/i.exec(url)
  const seconds = match === null ? NaN : Number(match[1])
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : undefined
}
