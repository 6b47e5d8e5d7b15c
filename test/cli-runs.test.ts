import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'

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
    for (const row of rows) expect(Object.keys(row).sort()).toEqual(['createdAt', 'goal', 'id', 'parentId', 'status', 'updatedAt'])

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
