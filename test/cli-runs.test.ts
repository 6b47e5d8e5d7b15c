import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { BIN, lastJson, runCli, tempDir, writeTask } from './support/cli.js'
import { asPreviousRelease } from './support/older-store.js'
import { CHAIN_NAMES } from '../packages/store/src/migrations/names.js'

const scriptedTask = (steps: unknown[], goal: string) => ({
  goal,
  workspace: `ws-${goal.replace(/\W+/g, '-')}`,
  providers: [{ name: 'script', kind: 'scripted', steps }],
  verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
  limits: { maxSteps: 2 },
  approval: 'auto'
})

describe('agentvisor runs and show', () => {
  it('lists runs as JSON rows and filters them by status', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const ok = writeTask(dir, scriptedTask([{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }], 'good'), 'ok.json')
    const capped = writeTask(dir, scriptedTask([{ text: 'nothing' }, { text: 'still nothing' }], 'capped'), 'capped.json')
    const first = lastJson(await runCli(['run', ok, '--json', '--db', db]))
    const second = lastJson(await runCli(['run', capped, '--json', '--db', db]))

    const all = await runCli(['runs', '--json', '--db', db])
    expect(all.code).toBe(0)
    const rows = lastJson<Array<Record<string, unknown>>>(all)
    expect(rows.map((r) => r['id']).sort()).toEqual([first['runId'], second['runId']].sort())
    for (const row of rows) expect(Object.keys(row).sort()).toEqual(['createdAt', 'goal', 'id', 'parentId', 'status', 'updatedAt', 'usage'])

    const failed = lastJson<Array<Record<string, unknown>>>(await runCli(['runs', '--json', '--status', 'step_cap', '--db', db]))
    expect(failed).toEqual([expect.objectContaining({ id: second['runId'], status: 'step_cap', goal: 'capped', parentId: null })])
  })

  it('uses $AGENTVISOR_DB when --db is not given', async () => {
    const dir = tempDir()
    const task = writeTask(dir, scriptedTask([{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }], 'env db'))
    const env = { AGENTVISOR_DB: path.join(dir, 'env.db') }
    const run = lastJson(await runCli(['run', task, '--json'], { env, cwd: dir }))
    const rows = lastJson<Array<Record<string, unknown>>>(await runCli(['runs', '--json'], { env, cwd: dir }))
    expect(rows.map((r) => r['id'])).toEqual([run['runId']])
  })

  it('lists the runs of a store an older version left behind, migrating it first, and of a missing one', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, scriptedTask([{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }], 'older'))
    const run = lastJson(await runCli(['run', task, '--json', '--db', db]))
    // What an older version's store looks like to this one: its newest migration not yet applied.
    asPreviousRelease(db)
    const newest = CHAIN_NAMES.at(-1)

    const listed = await runCli(['runs', '--db', db])
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toMatch(new RegExp(`^${run['runId']}  succeeded\\s+\\S+  -\\s+older\\n$`))
    const after = new BetterSqlite3(db, { readonly: true })
    expect(after.prepare('SELECT count(*) FROM kysely_migration WHERE name = ?').pluck().get(newest)).toBe(1)
    after.close()

    // A path with no store is a mistake to say, not an empty store to make (docs/cli.md).
    const missing = path.join(dir, 'new', 'av.db')
    const fresh = await runCli(['runs', '--json', '--db', missing])
    expect(fresh.code).toBe(2)
    expect(fresh.stderr).toBe(`agentvisor: no store at ${missing}: nothing has run with it yet (check --db, or $AGENTVISOR_DB)\n`)
    expect(lastJson(fresh)).toEqual({
      error: { kind: 'input', message: `no store at ${missing}: nothing has run with it yet (check --db, or $AGENTVISOR_DB)` }
    })
    expect(existsSync(path.join(dir, 'new'))).toBe(false)
  })

  it('ends quietly with exit 0 when the reader of its output stops early', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, scriptedTask([{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }], 'piped'))
    await runCli(['run', task, '--json', '--db', db])
    // `agentvisor runs --json | head -c 1` on a listing far larger than the pipe's buffer.
    const raw = new BetterSqlite3(db)
    raw.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
      INSERT INTO runs (id, parent_id, status, goal, state, steps, created_at, updated_at)
      SELECT printf('copy-%05d', i), NULL, 'succeeded', printf('%0200d', i), 'finished.succeeded', 1, '2026-11-30T00:00:00.000Z', '2026-11-30T00:00:00.000Z' FROM n`)
    raw.close()
    // pipefail: the pipeline's status is the CLI's own when it fails (head's is 0).
    const piped = spawnSync('bash', ['-c', `set -o pipefail; "${process.execPath}" "${BIN}" runs --json --db "${db}" | head -c 1; echo " exit=$?"`], {
      encoding: 'utf8'
    })
    expect(piped.stdout).toBe('[ exit=0\n')
    expect(piped.stderr).toBe('')
  })

  it('prints a readable trace and exits 2 for an unknown run', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, scriptedTask([{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }], 'readable'))
    const run = lastJson(await runCli(['run', task, '--json', '--db', db]))
    const show = await runCli(['show', String(run['runId']), '--db', db])
    expect(show.code).toBe(0)
    expect(show.stdout).toContain(`run ${run['runId']}  succeeded`)
    expect(show.stdout).toContain('dispatching --PROVIDER_OK--> acting')
    const missing = await runCli(['show', 'no-such-run', '--db', db])
    expect(missing.code).toBe(2)
    expect(missing.stderr.trim()).toBe('agentvisor: no run with id no-such-run')
  })
})

describe('agentvisor --help', () => {
  for (const command of ['run', 'resume', 'runs', 'show', 'approve', 'cancel', 'worker', 'inspect', 'mock-llm']) {
    it(`explains ${command} with its usage and an example, exit 0`, async () => {
      const help = await runCli([command, '--help'])
      expect(help.code).toBe(0)
      expect(help.stdout).toMatch(new RegExp(`^agentvisor ${command}`))
      expect(help.stdout).toMatch(/examples?:\n {2}agentvisor /)
    })
  }
})
