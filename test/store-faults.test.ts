import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import * as path from 'node:path'
import pg from 'pg'
import { startMockLlm, type MockLlm } from '@agentvisor/cli'
import { afterEach, describe, expect, inject, it } from 'vitest'
import { lastJson, mockTask, runCli, tempDir, writeTask } from './support/cli.js'
import { freshDatabase } from './support/pg.js'

let mock: MockLlm | undefined
const mounted: string[] = []
afterEach(async () => {
  await mock?.close()
  mock = undefined
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
    mock = await startMockLlm({
      scenarios: {
        models: { m: [exec('echo once >> log.txt'), { text: 'x'.repeat(2 * 1024 * 1024), toolCalls: [writeDone] }, { toolCalls: [writeDone] }] }
      } as never,
      port: 0
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
    mock = await startMockLlm({ scenarios: { models: { m: [exec('echo once >> log.txt'), { toolCalls: [writeDone] }] } } as never, port: 0 })
    // The verification after step 1 shuts the run's database to new connections and ends the open
    // ones (once): the run's next commit finds no store.
    const shut = `psql "${inject('pgUrl')}" -q -c 'ALTER DATABASE "${name}" ALLOW_CONNECTIONS false' -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}'" > /dev/null`
    const task = writeTask(dir, mockTask(mock.url, { verify: { command: { run: `[ -e ${cut} ] || { touch ${cut}; ${shut}; }; grep -q DONE out.txt` } } }))
    const env = { AGENTVISOR_DB: '' }
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
