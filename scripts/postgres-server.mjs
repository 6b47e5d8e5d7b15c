// A real PostgreSQL of the caller's own, for the test suite (test/support/postgres-server.ts) and
// the bench (bench/postgres-server.mjs): plain JavaScript, so that the bench runs it with plain
// node and the tests type-check it through its JSDoc.
import { execFileSync, spawn as spawnChild } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chownSync, closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import pg from 'pg'
import { freePort } from './free-port.mjs'

/** @param {string} command */
const onPath = (command) => {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/**
 * Where `initdb` and `postgres` are: on PATH, else Debian's versioned folder (the `postgresql`
 * package does not put the server binaries on PATH), the newest version first.
 * @returns {{ initdb: string, postgres: string }}
 */
const findBinaries = () => {
  if (onPath('initdb') && onPath('postgres')) return { initdb: 'initdb', postgres: 'postgres' }
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((version) => existsSync(path.join(root, version, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : []
  if (versions[0] === undefined) {
    throw new Error('PostgreSQL not found: no initdb/postgres on PATH nor in /usr/lib/postgresql/*/bin (Debian/Ubuntu: apt-get install postgresql)')
  }
  const bin = path.join(root, versions[0], 'bin')
  return { initdb: path.join(bin, 'initdb'), postgres: path.join(bin, 'postgres') }
}

/**
 * The major version of the PostgreSQL whose `initdb` this is (`initdb (PostgreSQL) 15.18`).
 * @param {string} initdb
 */
const majorVersion = (initdb) => Number(/\(PostgreSQL\) (\d+)/.exec(execFileSync(initdb, ['--version'], { encoding: 'utf8' }))?.[1] ?? 0)

/**
 * PostgreSQL refuses to run as root: then it runs as Debian's `postgres` user.
 * @returns {{ uid: number, gid: number } | undefined}
 */
const serverUser = () => {
  if (process.getuid?.() !== 0) return undefined
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'))
  const [, , uid, gid] = line?.split(':') ?? []
  if (uid === undefined || gid === undefined) {
    throw new Error("PostgreSQL refuses to run as root and there is no 'postgres' user to run it as (Debian's postgresql package creates one)")
  }
  return { uid: Number(uid), gid: Number(gid) }
}

/**
 * @typedef {object} PostgresServerOptions
 * @property {number} [maxConnections] `max_connections` (100).
 * @property {boolean} [durable] fsync and full-page writes on, as a production server has them
 *   (false: off; a crash of the machine may lose this throwaway cluster, nothing else).
 * @property {'on' | 'off'} [synchronousCommit] `synchronous_commit` (off).
 * @property {'icu' | 'c'} [collation] `icu` (the default): ICU `en-US` from PostgreSQL 15 on, like
 *   a typical production database, so that a query whose order depends on the collation sorts
 *   differently from SQLite and fails; `c`: byte order.
 * @property {(command: string, args: string[], options: import('node:child_process').SpawnOptions) => import('node:child_process').ChildProcess} [spawn]
 *   How the server process is started (the tests' ends with the test run, even a killed one).
 */

/**
 * @typedef {object} PostgresServer
 * @property {(database?: string) => string} url A superuser URL of `database` (`postgres`).
 * @property {() => Promise<void>} stop Stops the server (SIGINT, PostgreSQL's fast shutdown:
 *   clients are disconnected, not waited for) and resolves once its process has exited; its data stays.
 * @property {() => Promise<void>} start Starts it again on the same port and data, resolving once it accepts connections.
 * @property {() => Promise<void>} remove Stops it (if running) and deletes its folder.
 * @property {() => boolean} running Whether its process is up.
 */

/**
 * Starts a real PostgreSQL: a fresh cluster (initdb) in a temporary folder, listening on
 * 127.0.0.1 on a random port (its socket in that folder). A missing PostgreSQL is an error;
 * nothing skips.
 * @param {PostgresServerOptions} [options]
 * @returns {Promise<PostgresServer>}
 */
export const startPostgresServer = async (options = {}) => {
  const { initdb, postgres } = findBinaries()
  const user = serverUser()
  const folder = mkdtempSync(path.join(tmpdir(), 'agentvisor-pg-'))
  const data = path.join(folder, 'data')
  const password = randomBytes(12).toString('hex')
  const passwordFile = path.join(folder, 'password')
  writeFileSync(passwordFile, `${password}\n`)
  if (user !== undefined) {
    chownSync(folder, user.uid, user.gid)
    chownSync(passwordFile, user.uid, user.gid)
  }
  const asServer = user === undefined ? {} : { uid: user.uid, gid: user.gid }
  // ICU as the default collation provider arrived in PostgreSQL 15; an older server sorts
  // byte-wise by default, so the tests cannot catch a locale-dependent order there.
  const icu = (options.collation ?? 'icu') === 'icu' && majorVersion(initdb) >= 15

  try {
    execFileSync(
      initdb,
      [
        '-D',
        data,
        '-U',
        'postgres',
        `--pwfile=${passwordFile}`,
        '--auth-local=trust',
        '--auth-host=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C.UTF-8',
        ...(icu ? ['--locale-provider=icu', '--icu-locale=en-US'] : []),
        '--no-sync',
        '--no-instructions'
      ],
      { ...asServer, cwd: folder, stdio: ['ignore', 'ignore', 'pipe'] }
    )
  } catch (error) {
    const stderr = String(/** @type {{ stderr?: unknown }} */ (error).stderr ?? '')
      .trim()
      .split('\n')
      .at(-1)
    rmSync(folder, { recursive: true, force: true })
    throw new Error(`initdb failed: ${stderr || /** @type {Error} */ (error).message}`)
  }

  const port = await freePort()
  const log = path.join(folder, 'postgres.log')
  const url = (database = 'postgres') => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`
  const lastLogLine = () => readFileSync(log, 'utf8').trim().split('\n').at(-1) ?? ''
  const settings = {
    ...(options.durable === true ? {} : { fsync: 'off', full_page_writes: 'off' }),
    synchronous_commit: options.synchronousCommit ?? 'off',
    max_connections: String(options.maxConnections ?? 100)
  }
  const spawn = options.spawn ?? spawnChild
  /** @type {import('node:child_process').ChildProcess | undefined} */
  let server

  const start = async () => {
    const logFd = openSync(log, 'a')
    if (user !== undefined) chownSync(log, user.uid, user.gid)
    const child = spawn(
      postgres,
      ['-D', data, '-h', '127.0.0.1', '-p', String(port), '-k', folder, ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`])],
      { ...asServer, cwd: folder, stdio: ['ignore', logFd, logFd] }
    )
    closeSync(logFd)
    server = child
    /** @type {Promise<never>} */
    const failed = new Promise((_, reject) => {
      child.once('error', (error) => reject(new Error(`cannot start PostgreSQL (${postgres}): ${error.message}`)))
      child.once('exit', (code) => reject(new Error(`PostgreSQL exited early with code ${code}: ${lastLogLine()}`)))
    })
    const ready = (async () => {
      for (let i = 0; i < 400; i++) {
        const client = new pg.Client({ connectionString: url(), connectionTimeoutMillis: 1000 })
        try {
          await client.connect()
          await client.query('select 1')
          return
        } catch {
          await new Promise((r) => setTimeout(r, 50))
        } finally {
          await client.end().catch(() => undefined)
        }
      }
      throw new Error(`PostgreSQL did not accept connections on 127.0.0.1:${port}: ${lastLogLine()}`)
    })()
    failed.catch(() => undefined) // once ready, a later exit (a stop's) is no failure
    await Promise.race([ready, failed])
  }

  const running = () => server?.pid !== undefined && server.exitCode === null && server.signalCode === null

  const stop = async () => {
    const child = server
    if (child === undefined || !running()) return
    const exited = new Promise((r) => child.once('exit', r))
    child.kill('SIGINT')
    const timer = setTimeout(() => child.kill('SIGQUIT'), 10_000)
    await exited
    clearTimeout(timer)
  }

  await start()
  return {
    url,
    stop,
    start,
    running,
    remove: async () => {
      await stop()
      rmSync(folder, { recursive: true, force: true })
    }
  }
}
