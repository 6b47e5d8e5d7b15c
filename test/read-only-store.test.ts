import { execFileSync } from 'node:child_process'
import { spawnTethered } from '@agentvisor/cli'
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import pg from 'pg'
import { insertRun, openStore } from '@agentvisor/store'
import { afterAll, describe, expect, it } from 'vitest'
import { asPreviousRelease } from './support/older-store.js'
import { BIN, lastJson, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { freshDatabase } from './support/pg.js'
import { admin } from '../packages/store/test/support/temp-store.js'
import { runCall } from './support/run-call.js'

// A read-only mount, as root sees one: chmod does not stop root, a `ro` bind mount does (EROFS).
const mounts: string[] = []
afterAll(() => {
  for (const mount of mounts.reverse()) execFileSync('umount', [mount])
})

/** `folder` seen through a read-only bind mount; unmounted after the file's tests. */
const readOnlyView = (folder: string): string => {
  const view = tempDir('agentvisor-ro-view-')
  execFileSync('mount', ['-o', 'bind,ro', folder, view])
  mounts.push(view)
  // Really read-only, even to this root process.
  expect(() => writeFileSync(path.join(view, 'probe'), 'x')).toThrow(/EROFS/)
  return view
}

const done = { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }

/** Runs a scripted task to success into the store `db` and returns its run id. */
const runTask = async (dir: string, db: string, goal: string): Promise<string> => {
  const task = writeTask(
    dir,
    {
      goal,
      workspace: `ws-${goal.replace(/\W+/g, '-')}`,
      providers: [{ name: 'script', kind: 'scripted', steps: [done] }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      approval: 'auto'
    },
    `${goal.replace(/\W+/g, '-')}.json`
  )
  const result = await runCli(['run', task, '--json', '--db', db])
  expect(result.code, result.stderr).toBe(0)
  return lastJson<{ runId: string }>(result).runId
}

/** The inspector of the real CLI on `db`, queried over HTTP: its run list and one run's view. */
const inspect = async (db: string, runId: string): Promise<{ runs: Array<{ id: string }>; run: { status: number; body: unknown } }> => {
  const child = spawnTethered(process.execPath, [BIN, 'inspect', '--port', '0', '--db', db], { stdio: ['ignore', 'pipe', 'pipe'], watchesTether: true })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve))
  try {
    const url = await waitFor(() => {
      if (child.exitCode !== null) throw new Error(`inspect exited ${child.exitCode}: ${stderr}`)
      return /inspector on (\S+)/.exec(stdout)?.[1]
    }, 'the inspector URL')
    // The URL's token goes as a bearer token, as a script sends it (docs/inspector.md, "The JSON API").
    const printed = new URL(url)
    const headers = { authorization: `Bearer ${printed.searchParams.get('token')}` }
    const runs = (await (await fetch(new URL('/api/runs', printed), { headers })).json()) as Array<{ id: string }>
    const res = await fetch(new URL(`/api/runs/${runId}`, printed), { headers })
    return { runs, run: { status: res.status, body: await res.json() } }
  } finally {
    child.kill('SIGTERM')
    await exited
  }
}

/** What every read command gives on `db`: `runs --json`, `show --json` of each run, and the inspector. */
const expectReadable = async (db: string, runIds: ReadonlyArray<string>): Promise<void> => {
  const listed = await runCli(['runs', '--json', '--db', db])
  expect(listed.code, listed.stderr).toBe(0)
  expect(
    lastJson<Array<{ id: string }>>(listed)
      .map((r) => r.id)
      .sort()
  ).toEqual([...runIds].sort())
  const table = await runCli(['runs', '--db', db])
  expect(table.code, table.stderr).toBe(0)
  for (const id of runIds) expect(table.stdout).toContain(id)
  for (const id of runIds) {
    const show = await runCli(['show', id, '--json', '--db', db])
    expect(show.code, show.stderr).toBe(0)
    expect(lastJson<{ run: { id: string } }>(show).run.id).toBe(id)
  }
  const inspector = await inspect(db, runIds[0]!)
  expect(inspector.runs.map((r) => r.id).sort()).toEqual([...runIds].sort())
  expect(inspector.run.status).toBe(200)
  expect(inspector.run.body).toMatchObject({ run: { id: runIds[0] } })
}

describe('the read commands on a read-only store (docs/cli.md, "Read-only stores")', () => {
  it('list, show and inspect a store left cleanly closed, with no -wal or -shm file beside it', async () => {
    const dir = tempDir('agentvisor-ro-')
    const store = path.join(dir, 'store')
    const db = path.join(store, 'av.db')
    const first = await runTask(dir, db, 'first run')
    const second = await runTask(dir, db, 'second run')
    // The last writer checkpointed and removed its WAL files: SQLite would need to create the
    // -shm file to read this WAL-mode database, and the folder cannot take one.
    expect(readdirSync(store)).toEqual(['av.db'])

    const view = readOnlyView(store)
    await expectReadable(path.join(view, 'av.db'), [first, second])
    expect(readdirSync(store)).toEqual(['av.db'])
  })

  it('list, show and inspect a store whose writer is still open, reading its commits from the -wal file it cannot write', async () => {
    const dir = tempDir('agentvisor-ro-')
    const store = path.join(dir, 'store')
    const db = path.join(store, 'av.db')
    const first = await runTask(dir, db, 'first run')
    // A writer that stays open: its commit sits in the -wal file, not yet in the database file.
    const writer = await openStore(db)
    try {
      await runCall(
        insertRun(writer.db, {
          id: 'live-run',
          parent_id: null,
          status: 'running',
          goal: 'still in the WAL',
          contract_json: '{}',
          state: 'dispatching',
          created_at: '2026-12-01T00:00:00.000Z',
          updated_at: '2026-12-01T00:00:00.000Z'
        })
      )
      expect(statSync(`${db}-wal`).size).toBeGreaterThan(0)
      expect(existsSync(`${db}-shm`)).toBe(true)

      const view = readOnlyView(store)
      await expectReadable(path.join(view, 'av.db'), [first, 'live-run'])
    } finally {
      await writer.close()
    }
  })

  it('refuses a read-only store of an older version with one line saying it must be migrated by a writable open, exit 2', async () => {
    const dir = tempDir('agentvisor-ro-')
    const store = path.join(dir, 'store')
    const db = path.join(store, 'av.db')
    await runTask(dir, db, 'old run')
    asPreviousRelease(db)

    const view = path.join(readOnlyView(store), 'av.db')
    for (const args of [
      ['runs', '--json'],
      ['show', 'any-run']
    ]) {
      const result = await runCli([...args, '--db', view])
      expect(result.code, args.join(' ')).toBe(2)
      expect(result.stderr.trim().split('\n')).toEqual([
        `agentvisor: The store ${view} is read-only and was written by an older agentvisor: it must be migrated first by a command that writes (run, resume, approve) where it is writable`
      ])
    }
  })
})

describe('the read commands on PostgreSQL', () => {
  it('list and show runs as a role that may only read, since a current schema is never migrated', async () => {
    const dir = tempDir('agentvisor-pg-ro-')
    const db = await freshDatabase()
    const env = { AGENTVISOR_DB: '' }
    const task = writeTask(dir, {
      goal: 'read me back',
      workspace: 'ws',
      providers: [{ name: 'script', kind: 'scripted', steps: [done] }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      approval: 'auto'
    })
    const ran = await runCli(['run', task, '--json', '--db', db.url], { cwd: dir, env })
    expect(ran.code, ran.stderr).toBe(0)
    const { runId } = lastJson<{ runId: string }>(ran)

    const role = `agentvisor_reader_${randomBytes(4).toString('hex')}`
    await admin().query(`create role "${role}" login password 'reader-pass'`)
    try {
      await db.query(`grant usage on schema public to "${role}"`)
      await db.query(`grant select on all tables in schema public to "${role}"`)
      const url = new URL(db.url)
      url.username = role
      url.password = 'reader-pass'
      // The role can read and nothing else: a write through it is refused.
      const client = new pg.Client({ connectionString: url.toString() })
      await client.connect()
      try {
        await expect(client.query("update runs set goal = 'x'")).rejects.toThrow(/permission denied/)
      } finally {
        await client.end()
      }

      const listed = await runCli(['runs', '--json', '--db', url.toString()], { cwd: dir, env })
      expect(listed.code, listed.stderr).toBe(0)
      expect(lastJson(listed)).toEqual([expect.objectContaining({ id: runId, status: 'succeeded', goal: 'read me back' })])
      const show = await runCli(['show', runId, '--json', '--db', url.toString()], { cwd: dir, env })
      expect(show.code, show.stderr).toBe(0)
      expect(lastJson<{ run: { id: string; status: string } }>(show).run).toMatchObject({ id: runId, status: 'succeeded' })
    } finally {
      await db.query(`drop owned by "${role}"`).catch(() => undefined)
      await admin()
        .query(`drop role if exists "${role}"`)
        .catch(() => undefined)
    }
  })
})
