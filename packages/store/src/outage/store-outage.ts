/**
 * Whether a store call's failure is an outage: the store could not be reached, or the connection
 * to it was lost (docs/durability.md, "A store outage"). A driving process rides such a failure
 * out, retrying the same call; any other failure (a constraint, a full disk, a corrupt row, a
 * wrong password) is reported at once, as before.
 *
 * What counts, on PostgreSQL through `pg`:
 * - a socket that cannot connect or was cut (`ECONNREFUSED`, `ECONNRESET`, `ETIMEDOUT`, `EPIPE`,
 *   an unreachable host or network, a name that does not resolve for now);
 * - `pg`'s own "Connection terminated ..." and "timeout exceeded when trying to connect";
 * - SQLSTATE class 08 (connection exception), 57P01 `admin_shutdown`, 57P02 `crash_shutdown`,
 *   57P03 `cannot_connect_now` (starting up, shutting down, in recovery), 53300
 *   `too_many_connections`, and a database closed to new connections for a while
 *   (`ALTER DATABASE ... ALLOW_CONNECTIONS false`).
 *
 * SQLite has none: its file is local, and a lock held past its busy timeout is another
 * process's long transaction, not an outage (docs/durability.md explains the choice).
 *
 * The cause chain is followed (`cause`, an `AggregateError`'s `errors`), so a `StoreError`
 * wrapping one of these is one too.
 */
export const isStoreOutage = (error: unknown): boolean => {
  for (let depth = 0, current = error; depth < 8 && current != null && typeof current === 'object'; depth++) {
    const { code, message, errors, cause } = current as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown }
    if (typeof code === 'string' && (SOCKET_CODES.has(code) || SQLSTATES.has(code) || code.startsWith('08'))) return true
    if (typeof code === 'string' && code === '55000' && typeof message === 'string' && NOT_ACCEPTING.test(message)) return true
    if (typeof message === 'string' && code === undefined && PG_MESSAGES.test(message)) return true
    if (Array.isArray(errors) && errors.some(isStoreOutage)) return true
    current = cause
  }
  return false
}

const SOCKET_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN'
])

/** admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections. */
const SQLSTATES: ReadonlySet<string> = new Set(['57P01', '57P02', '57P03', '53300'])

/** `pg`'s errors for a connection it lost or could not open (they carry no code). */
const PG_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/

/** PostgreSQL's 55000 for a database closed to connections (`ALLOW_CONNECTIONS false`). */
const NOT_ACCEPTING = /is not currently accepting connections/

/** A unique violation: on the retry of a write whose first try may have landed, the proof that it did. */
export const isUniqueViolation = (error: unknown): boolean => (error as { code?: unknown } | null)?.code === '23505'
