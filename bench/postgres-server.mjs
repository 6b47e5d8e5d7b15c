// The PostgreSQL server of the bench's scenarios and A/Bs, started the way the test suite's global
// setup starts one (test/setup/postgres.ts): a fresh cluster (initdb) in a temporary folder,
// `postgres` listening on a free 127.0.0.1 port (its socket in that folder), run as the `postgres`
// user when the bench runs as root, stopped by its PID at the end. Apart from the scenarios so that
// a script can start one without LangGraph's packages installed (layout-ab.mjs).
import { execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chownSync, closeSync, existsSync, openSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { freePort, rm, tmp } from './lib.mjs'

const onPath = (command) => {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** `initdb` and `postgres`: on PATH, else Debian's newest versioned folder. */
const binaries = () => {
  if (onPath('initdb') && onPath('postgres')) return { initdb: 'initdb', postgres: 'postgres' }
  const root = '/usr/lib/postgresql'
  const version = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))[0]
    : undefined
  if (version === undefined) throw new Error('PostgreSQL not found: no initdb/postgres on PATH nor in /usr/lib/postgresql/*/bin')
  return { initdb: join(root, version, 'bin', 'initdb'), postgres: join(root, version, 'bin', 'postgres') }
}

/** PostgreSQL refuses to run as root: then it runs as the `postgres` user. */
const serverUser = () => {
  if (process.getuid?.() !== 0) return undefined
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'))
  const [, , uid, gid] = line?.split(':') ?? []
  if (uid === undefined || gid === undefined) throw new Error("PostgreSQL refuses to run as root and there is no 'postgres' user to run it as")
  return { uid: Number(uid), gid: Number(gid) }
}

/**
 * A fresh PostgreSQL on 127.0.0.1: `{ url(name), createDatabase(), dropDatabase(name), stop() }`.
 * `url(name)` is a superuser URL of database `name`. `synchronousCommit`: the server's
 * `synchronous_commit`, `off` for the scenarios (see scenarios/postgres.mjs), `on` (PostgreSQL's
 * default) where a figure is of a commit that waits for its WAL flush.
 */
export const startPostgres = async ({ synchronousCommit = 'off' } = {}) => {
  const { initdb, postgres } = binaries()
  const user = serverUser()
  const folder = tmp('pg')
  const data = join(folder, 'data')
  const password = randomBytes(12).toString('hex')
  const passwordFile = join(folder, 'password')
  writeFileSync(passwordFile, `${password}\n`)
  if (user !== undefined) {
    chownSync(folder, user.uid, user.gid)
    chownSync(passwordFile, user.uid, user.gid)
  }
  const asServer = user === undefined ? {} : { uid: user.uid, gid: user.gid }
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
      '--no-sync'
    ],
    { ...asServer, cwd: folder, stdio: ['ignore', 'ignore', 'pipe'] }
  )
  const port = await freePort()
  const log = join(folder, 'postgres.log')
  const logFd = openSync(log, 'a')
  if (user !== undefined) chownSync(log, user.uid, user.gid)
  const child = spawn(
    postgres,
    ['-D', data, '-h', '127.0.0.1', '-p', String(port), '-k', folder, '-c', `synchronous_commit=${synchronousCommit}`, '-c', 'max_connections=200'],
    {
      ...asServer,
      cwd: folder,
      stdio: ['ignore', logFd, logFd]
    }
  )
  closeSync(logFd)
  const url = (name) => `postgres://postgres:${password}@127.0.0.1:${port}/${name}`
  let ready = false
  for (let i = 0; i < 400 && !ready && child.exitCode === null; i++) {
    const client = new pg.Client({ connectionString: url('postgres'), connectionTimeoutMillis: 1000 })
    try {
      await client.connect()
      await client.query('select 1')
      ready = true
    } catch {
      await new Promise((r) => setTimeout(r, 50))
    } finally {
      await client.end().catch(() => undefined)
    }
  }
  if (!ready) {
    if (child.exitCode === null) child.kill('SIGQUIT')
    throw new Error(`PostgreSQL did not start: ${readFileSync(log, 'utf8').trim().split('\n').at(-1)}`)
  }
  const admin = new pg.Pool({ connectionString: url('postgres'), max: 1 })
  admin.on('error', () => undefined)
  // A bench that dies half-way must not leave its server running: stopped by its PID on exit.
  const stopOnExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGQUIT')
  }
  process.once('exit', stopOnExit)
  let databases = 0
  return {
    url,
    createDatabase: async () => {
      const name = `bench_${++databases}`
      await admin.query(`create database "${name}"`)
      return name
    },
    dropDatabase: (name) => admin.query(`drop database if exists "${name}" with (force)`),
    stop: async () => {
      process.removeListener('exit', stopOnExit)
      await admin.end()
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r))
        // SIGINT is PostgreSQL's fast shutdown: it disconnects clients instead of waiting for them.
        child.kill('SIGINT')
        const timer = setTimeout(() => child.kill('SIGQUIT'), 10_000)
        await exited
        clearTimeout(timer)
      }
      rm(folder)
    }
  }
}
