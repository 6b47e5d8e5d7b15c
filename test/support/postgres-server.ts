import { type ChildProcess, execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chownSync, closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import pg from 'pg'
import { spawnTethered } from '@agentvisor/cli'
import { freePort } from './free-port.js'

const onPath = (command: string): boolean => {
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
 */
function findBinaries(): { initdb: string; postgres: string } {
  if (onPath('initdb') && onPath('postgres')) return { initdb: 'initdb', postgres: 'postgres' }
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((version) => existsSync(path.join(root, version, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : []
  const bin = versions[0] === undefined ? undefined : path.join(root, versions[0], 'bin')
  if (bin === undefined) {
    throw new Error('PostgreSQL not found: no initdb/postgres on PATH nor in /usr/lib/postgresql/*/bin (Debian/Ubuntu: apt-get install postgresql)')
  }
  return { initdb: path.join(bin, 'initdb'), postgres: path.join(bin, 'postgres') }
}

/** The major version of the PostgreSQL whose `initdb` this is (`initdb (PostgreSQL) 15.18`). */
const majorVersion = (initdb: string): number => Number(/\(PostgreSQL\) (\d+)/.exec(execFileSync(initdb, ['--version'], { encoding: 'utf8' }))?.[1] ?? 0)

/** PostgreSQL refuses to run as root: then it runs as Debian's `postgres` user. */
function serverUser(): { uid: number; gid: number } | undefined {
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
 * Starts a real PostgreSQL: a fresh cluster (initdb) in a temporary folder, listening on
 * 127.0.0.1 on a random port (its socket in that folder). A missing PostgreSQL is an error;
 * nothing skips. The test run's server (test/setup/postgres.ts) is one; a test that stops its
 * store mid-run starts one of its own, so that other tests' server stays up.
 *
 * The cluster's collation is ICU `en-US`, not C, like a typical production database: a query
 * whose order depends on the collation would sort differently from SQLite here, and fail.
 * fsync is off: a crash of the test machine may lose this throwaway cluster, nothing else.
 */
export async function startPostgresServer(options: { readonly maxConnections?: number } = {}): Promise<PostgresServer> {
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
        // ICU as the default collation provider arrived in PostgreSQL 15; an older server sorts
        // byte-wise by default, so the tests cannot catch a locale-dependent order there.
        ...(majorVersion(initdb) >= 15 ? ['--locale-provider=icu', '--icu-locale=en-US'] : []),
        '--no-sync',
        '--no-instructions'
      ],
      { ...asServer, cwd: folder, stdio: ['ignore', 'ignore', 'pipe'] }
    )
  } catch (error) {
    const stderr = String((error as { stderr?: unknown }).stderr ?? '')
      .trim()
      .split('\n')
      .at(-1)
    rmSync(folder, { recursive: true, force: true })
    throw new Error(`initdb failed: ${stderr || (error as Error).message}`)
  }

  const port = await freePort()
  const log = path.join(folder, 'postgres.log')
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`
  const lastLogLine = (): string => readFileSync(log, 'utf8').trim().split('\n').at(-1) ?? ''
  let server: ChildProcess | undefined

  const start = async (): Promise<void> => {
    const logFd = openSync(log, 'a')
    if (user !== undefined) chownSync(log, user.uid, user.gid)
    // Tethered: the server and its backends end with the test run, even a killed one (docs/cli.md, "Ending with the parent").
    const child = spawnTethered(
      postgres,
      [
        '-D',
        data,
        '-h',
        '127.0.0.1',
        '-p',
        String(port),
        '-k',
        folder,
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
        '-c',
        `max_connections=${options.maxConnections ?? 100}`
      ],
      { ...asServer, cwd: folder, stdio: ['ignore', logFd, logFd] }
    )
    closeSync(logFd)
    server = child
    const failed = new Promise<never>((_, reject) => {
      child.once('error', (error) => reject(new Error(`cannot start PostgreSQL (${postgres}): ${error.message}`)))
      child.once('exit', (code) => reject(new Error(`PostgreSQL exited early with code ${code}: ${lastLogLine()}`)))
    })
    const ready = (async () => {
      for (let i = 0; i < 400; i++) {
        const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 })
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

  const stop = async (): Promise<void> => {
    const child = server
    if (child?.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((r) => child.once('exit', r))
    process.kill(child.pid, 'SIGINT')
    const timer = setTimeout(() => child.pid !== undefined && process.kill(child.pid, 'SIGQUIT'), 10_000)
    await exited
    clearTimeout(timer)
  }

  await start()
  return {
    url,
    stop,
    start,
    remove: async () => {
      await stop()
      rmSync(folder, { recursive: true, force: true })
    }
  }
}
