import type { ChildProcess } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { type MockLlm, spawnTethered } from '@agentvisor/cli'
import { afterEach, describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { natsWorldPerTest } from './support/nats.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const BOT = fileURLToPath(new URL('../examples/supervisor/approval-bot.mjs', import.meta.url))

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined
let bot: ChildProcess | undefined
afterEach(async () => {
  if (bot !== undefined && bot.exitCode === null) {
    const exited = new Promise((resolve) => bot!.once('exit', resolve))
    bot.kill('SIGTERM')
    await exited
  }
  bot = undefined
})

const natsWorld = natsWorldPerTest()
const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })

describe('the supervising service of examples/supervisor', () => {
  it('approves a write under docs/ and denies one elsewhere, over NATS, and the run finishes on its decisions', async () => {
    mock = await startMock([write('docs/guide.md', 'G'), write('secrets.txt', 'S'), { text: 'guide written; the secrets file was refused' }])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    await world.serving(db)
    bot = spawnTethered(process.execPath, [BOT, env['AGENTVISOR_NATS_URL']!], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let log = ''
    bot.stdout!.on('data', (d: Buffer) => (log += d.toString()))
    bot.stderr!.on('data', (d: Buffer) => (log += d.toString()))
    await waitFor(() => (log.includes('listening') ? true : undefined), 'the bot listening')

    // Every write asks; nobody is at the run's terminal, so each ask waits for a decision.
    const task = writeTask(dir, {
      goal: 'Write the guide',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      policy: { layers: [{ name: 'team', ask: { write: ['**'] } }] },
      approval: 'defer'
    })
    const ran = await runCli(['run', task, '--json', '--db', db, '--nats', env['AGENTVISOR_NATS_URL']!], { env })
    expect(ran.code).toBe(3)
    const runId = lastJson<{ runId: string }>(ran).runId

    // The bot decided both; a worker drove the run on after each decision, to its end.
    const finished = await waitFor(async () => {
      const listed = JSON.parse((await runCli(['runs', '--json', '--db', db])).stdout) as Array<{ id: string; status: string }>
      const run = listed.find((r) => r.id === runId)
      return run?.status === 'succeeded' ? run : undefined
    }, 'the run to succeed')
    expect(finished.status).toBe('succeeded')
    expect(readFileSync(path.join(dir, 'ws', 'docs', 'guide.md'), 'utf8')).toBe('G')
    expect(existsSync(path.join(dir, 'ws', 'secrets.txt'))).toBe(false)
    const shown = lastJson<{ approvals: Array<{ target: string; status: string; source: string }> }>(await runCli(['show', runId, '--json', '--db', db]))
    expect(shown.approvals.map((a) => [a.target, a.status, a.source])).toEqual([
      ['docs/guide.md', 'approved', 'nats'],
      ['secrets.txt', 'denied', 'nats']
    ])
    expect(log).toContain(`run ${runId} (tree ${runId}): approved write docs/guide.md`)
    expect(log).toContain(`run ${runId} (tree ${runId}): denied write secrets.txt`)
  })
})
