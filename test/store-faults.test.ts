import { execFileSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import pg from 'pg'
import type { MockLlm } from '@agentvisor/cli'
import { afterEach, describe, expect, inject, it, onTestFinished } from 'vitest'
import { lastJson, mockTask, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { freshDatabase, gaplessTransitions, type TestDatabase } from './support/pg.js'
import { type PostgresServer, startPostgresServer } from './support/postgres-server.js'
import { natsWorldPerTest } from './support/nats.js'
import { serving } from './support/workers.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined
const mounted: string[] = []
afterEach(async () => {
  for (const dir of mounted.splice(0)) execFileSync('umount', ['-l', dir])
})

/** A small tmpfs of its own: a disk that fills up without touching the machine's. */
const smallDisk = (dir: string, size: string): string => {
  if (process.getuid?.() !== 0) throw new Error('this test mounts a tmpfs and must run as root (CI does; see docs/development.md)')
  mkdirSync(dir, { recursive: true })
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir])
  mounted.push(dir)
  return dir
}

const exec = (command: string) => ({ toolCalls: [{ name: 'exec', arguments: { command } }] })
const writeDone = { name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }

describe('a store that fails mid-run', () => {
  it('leaves the run interrupted, never failed, when the disk fills up; resume finishes it with each effect once', async () => {
    const dir = tempDir()
    const disk = smallDisk(path.join(dir, 'disk'), '32m')
    const db = path.join(disk, 'av.db')
    const filled = path.join(dir, 'filled')
    // Step 1 has an effect; the verification after it fills the store's disk (once), and step 2's
    // 2 MB reply then needs room the disk no longer has. Whichever commit fails first, the run
    // must stop where the store has it and finish once there is room again.
    mock = await startMock.scenarios({
      models: { m: [exec('echo once >> log.txt'), { text: 'x'.repeat(2 * 1024 * 1024), toolCalls: [writeDone] }, { toolCalls: [writeDone] }] }
    })
    const task = writeTask(
      dir,
      mockTask(mock.url, {
        verify: { command: { run: `[ -e ${filled} ] || { touch ${filled}; head -c 64M /dev/zero > ${disk}/filler 2>/dev/null; }; grep -q DONE out.txt` } },
        limits: { maxSteps: 5, timeoutMs: 120_000 }
      })
    )
    const first = await runCli(['run', task, '--json', '--db', db])
    expect(existsSync(filled)).toBe(true)
    expect(first.code, first.stderr).toBe(1)
    const stopped = lastJson<{ runId: string; status: string; error: { kind: string; message: string } }>(first)
    expect(stopped.status).toBe('running')
    expect(stopped.error.message).toMatch(/store/)
    expect(stopped.error.message).toContain(`agentvisor resume ${stopped.runId}`)
    expect(first.stderr).not.toMatch(/\bfailed after\b/)

    // Reading works on a full disk; the store still has the run unfinished.
    const listed = await runCli(['runs', '--json', '--db', db])
    expect(listed.code, listed.stderr).toBe(0)
    expect((lastJson<unknown>(listed) as Array<{ id: string; status: string }>).find((r) => r.id === stopped.runId)?.status).toBe('running')

    rmSync(path.join(disk, 'filler'))
    const resumed = await runCli(['resume', stopped.runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson<{ status: string }>(resumed).status).toBe('succeeded')
    expect(readFileSync(path.join(dir, 'ws', 'log.txt'), 'utf8')).toBe('once\n')
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE')

    const shown = await runCli(['show', stopped.runId, '--json', '--db', db])
    expect(shown.code, shown.stderr).toBe(0)
    const trace = lastJson<{ transitions: Array<{ seq: number; to: string }> }>(shown)
    expect(trace.transitions.map((t) => t.seq)).toEqual(trace.transitions.map((_, i) => i + 1))
    expect(trace.transitions.filter((t) => t.to.startsWith('finished'))).toEqual([expect.objectContaining({ to: 'finished.succeeded' })])
  })

  it('leaves the run interrupted when PostgreSQL stops taking its connections mid-run; resume finishes it once it is back', async () => {
    const dir = tempDir()
    const db = await freshDatabase()
    const name = new URL(db.url).pathname.slice(1)
    const cut = path.join(dir, 'cut')
    mock = await startMock([exec('echo once >> log.txt'), { toolCalls: [writeDone] }])
    // The verification after step 1 shuts the run's database to new connections and ends the open
    // ones (once): the run's next commit finds no store.
    const shut = `psql "${inject('pgUrl')}" -q -c 'ALTER DATABASE "${name}" ALLOW_CONNECTIONS false' -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}'" > /dev/null`
    const task = writeTask(dir, mockTask(mock.url, { verify: { command: { run: `[ -e ${cut} ] || { touch ${cut}; ${shut}; }; grep -q DONE out.txt` } } }))
    // No riding out here: this is the run a store failure interrupts (past the limit, as at once).
    const env = { AGENTVISOR_DB: '', AGENTVISOR_STORE_OUTAGE_MS: '0' }
    const first = await runCli(['run', task, '--json', '--db', db.url], { cwd: dir, env })
    expect(existsSync(cut)).toBe(true)
    expect(first.code, first.stderr).toBe(1)
    const stopped = lastJson<{ runId: string; status: string; error: { message: string } }>(first)
    expect(stopped.status).toBe('running')
    expect(stopped.error.message).toContain(`agentvisor resume ${stopped.runId}`)

    await runSql(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`)
    expect(await db.query('select status from runs')).toEqual([{ status: 'running' }])
    const resumed = await runCli(['resume', stopped.runId, '--json', '--db', db.url], { cwd: dir, env })
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson<{ status: string }>(resumed).status).toBe('succeeded')
    expect(readFileSync(path.join(dir, 'ws', 'log.txt'), 'utf8')).toBe('once\n')
    expect(await db.query("select count(*)::int as n from tool_effects where name = 'exec'")).toEqual([{ n: 1 }])
  })
})

const natsWorld = natsWorldPerTest()

/** A PostgreSQL server of this test's own, which it stops and starts again; removed when the test finishes. */
const ownServer = async (): Promise<{ readonly server: PostgresServer; readonly db: TestDatabase }> => {
  const server = await startPostgresServer()
  const pool = new pg.Pool({ connectionString: server.url, max: 2 })
  // The test's own connections are cut by the stops too: not an uncaught error.
  pool.on('error', () => undefined)
  pool.on('connect', (client) => client.on('error', () => undefined))
  onTestFinished(async () => {
    await pool.end()
    await server.remove()
  })
  return {
    server,
    db: { url: server.url, query: async <R extends object>(sql: string, params: unknown[] = []) => (await pool.query(sql, params)).rows as R[] }
  }
}

/** A shell command that says it got here (`ready`), then holds until the test says go (`go`). */
const holdUntilGo = (dir: string): string => `touch ${dir}/ready; while [ ! -e ${dir}/go ]; do sleep 0.05; done`

describe('a PostgreSQL outage mid-run', () => {
  it('is ridden out: the run waits, logging it, and succeeds once the store is back, with each effect and each model call once', async () => {
    const dir = tempDir()
    const { server, db } = await ownServer()
    // Step 1's command holds until the store is down: its result is the first write that finds no store.
    mock = await startMock([exec(`echo once >> log.txt; ${holdUntilGo(dir)}`), { toolCalls: [writeDone] }])
    const task = writeTask(dir, mockTask(mock.url))
    let stderr = ''
    const done = runCli(['run', task, '--json', '--db', server.url], { cwd: dir, env: { AGENTVISOR_DB: '' }, onStderr: (text) => (stderr = text) })

    await waitFor(() => (existsSync(path.join(dir, 'ready')) ? true : undefined), 'the step 1 command to start')
    await server.stop()
    writeFileSync(path.join(dir, 'go'), '')
    // The store stays down until the process says it waits: the verdict never depends on timing.
    await waitFor(() => (stderr.includes('the store is unreachable') ? true : undefined), 'the run to say it waits for the store', 30_000)
    await server.start()

    const result = await done
    expect(result.code, result.stderr).toBe(0)
    expect(lastJson<{ status: string }>(result).status).toBe('succeeded')
    expect(result.stderr).toMatch(/the store is unreachable \(.+\); waiting up to 60 s/)
    expect(result.stderr).toContain('the store answers again after')
    expect(result.stderr).not.toContain(new URL(server.url).password)
    expect(readFileSync(path.join(dir, 'ws', 'log.txt'), 'utf8')).toBe('once\n')
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE')
    // One model call per step: the mock heard two, and the store has one receipt for each.
    expect(mock.requests).toHaveLength(2)
    expect(await db.query('select step, attempt from attempts order by step, attempt')).toEqual([
      { step: 1, attempt: 0 },
      { step: 2, attempt: 0 }
    ])
    expect(await db.query("select name, status from tool_effects where name = 'exec'")).toEqual([{ name: 'exec', status: 'completed' }])
    expect([...(await gaplessTransitions(db)).values()]).toHaveLength(1)
    expect(await db.query('select status from runs')).toEqual([{ status: 'succeeded' }])
  })

  it('past the limit interrupts the run, and the worker holding it resumes it once the store is back, nothing repeated', async () => {
    const dir = tempDir()
    const { server, db } = await ownServer()
    mock = await startMock([exec('echo once >> log.txt'), { toolCalls: [writeDone] }])
    // The verification after step 1 holds until the store is down (nothing of the run is in flight then).
    const template = writeTask(
      dir,
      mockTask(mock.url, { verify: { command: { run: `[ -e ${dir}/go ] || { ${holdUntilGo(dir)}; }; grep -q DONE out.txt` } } }),
      'template.json'
    )
    const world = natsWorld()
    const env = world.env
    const worker = world.worker(server.url, ['--submit-template', template, '--store-outage-ms', '2000'])
    await serving([worker])
    const nc = await world.connect()
    const runId = randomUUID()
    const submission = new TextEncoder().encode(JSON.stringify({ v: 1, runId, contract: { goal: 'Write DONE into out.txt' } }))
    const reply = JSON.parse(new TextDecoder().decode((await nc.request(`${env['AGENTVISOR_NATS_PREFIX']}.runs.submit`, submission, { timeout: 60_000 })).data))
    expect(reply).toEqual({ v: 1, ok: true, runId })

    await waitFor(() => (existsSync(path.join(dir, 'ready')) ? true : undefined), 'the verification to start')
    await server.stop()
    writeFileSync(path.join(dir, 'go'), '')
    await waitFor(() => (worker.log().includes(`run ${runId} is interrupted by the store outage`) ? true : undefined), 'the run to be interrupted', 30_000)
    expect(worker.log()).toMatch(/the store is unreachable \(.+\); waiting up to 2\.0 s/)
    expect(worker.log()).toMatch(/the store is still unreachable after \d+\.\d s; the runs waiting for it are interrupted/)
    await server.start()

    await waitFor(() => (worker.log().includes(`run ${runId} succeeded`) ? true : undefined), 'the resumed run to succeed', 30_000)
    expect(worker.log()).toContain(`the store answers again: resuming run ${runId}`)
    expect(await db.query('select id, status from runs')).toEqual([{ id: runId, status: 'succeeded' }])
    expect(readFileSync(path.join(dir, 'ws', 'log.txt'), 'utf8')).toBe('once\n')
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE')
    expect(mock.requests).toHaveLength(2)
    expect(await db.query('select step, attempt from attempts order by step, attempt')).toEqual([
      { step: 1, attempt: 0 },
      { step: 2, attempt: 0 }
    ])
    expect(await db.query("select count(*)::int as n from tool_effects where name = 'exec'")).toEqual([{ n: 1 }])
    expect([...(await gaplessTransitions(db)).values()]).toHaveLength(1)
  })
})

/** One statement as the test server's superuser. */
const runSql = async (sql: string): Promise<void> => {
  const client = new pg.Client({ connectionString: inject('pgUrl') })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}
