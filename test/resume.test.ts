import { readFileSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, taskInTempDir, tempDir, waitFor } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()

interface Trace {
  run: { id: string; status: string }
  transitions: Array<{ seq: number; from: string; event: string; to: string }>
  receipts: Array<{ step: number; attempts: Array<{ reason: string; outcome: string }>; winner: number | null }>
}

describe('agentvisor resume', () => {
  it('finishes a run killed mid-dispatch under the same run id, settling the lost attempt unknown', async () => {
    const mock = await startMock(
      [
        { toolCalls: [{ name: 'write_file', arguments: { path: 'plan.md', content: 'plan' } }] },
        { delayMs: 60_000, text: 'never delivered' },
        { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }
      ],
      'test-model'
    )
    const { dir, db, task } = taskInTempDir({
      goal: 'Write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'primary', kind: 'openai', baseUrl: mock.url, model: 'test-model' }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      approval: 'auto'
    })

    let pid = 0
    let runId: string | undefined
    const first = runCli(['run', task, '--json', '--db', db], {
      onSpawn: (p) => (pid = p),
      onStderr: (text) => (runId ??= /run (\S+) started/.exec(text)?.[1])
    })
    // The second model call is in flight at the mock: kill the driver without warning.
    await waitFor(() => (mock.requests.length === 2 ? true : undefined), 'the second dispatch')
    process.kill(pid, 'SIGKILL')
    const killed = await first
    expect(killed.code).toBe(null)
    expect(runId).toBeDefined()

    const resumed = await runCli(['resume', runId!, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toEqual({ runId, status: 'succeeded', steps: 2, usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) } })
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE')
    expect(mock.requests).toHaveLength(3)

    const trace = lastJson<Trace>(await runCli(['show', runId!, '--json', '--db', db]))
    expect(trace.receipts.find((r) => r.step === 2)).toEqual({
      step: 2,
      winner: 1,
      attempts: [expect.objectContaining({ reason: 'initial', outcome: 'unknown' }), expect.objectContaining({ reason: 'retry', outcome: 'ok' })]
    })
    expect(trace.transitions.map((t) => t.event)).toContain('DISPATCH_LOST')
    expect(trace.transitions.map((t) => t.seq)).toEqual(trace.transitions.map((_, i) => i + 1))
  })

  it('exits 2 with a clear line for an unknown run id', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    // A store with other runs in it: the id is what is unknown.
    const task = path.join(dir, 'task.json')
    writeFileSync(task, JSON.stringify({ goal: 'Say hi', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [{ text: 'hi' }] }] }))
    expect((await runCli(['run', task, '--db', db])).code).toBe(0)
    const result = await runCli(['resume', 'no-such-run', '--db', db])
    expect(result.code).toBe(2)
    expect(result.stderr.trim()).toBe('agentvisor: no run with id no-such-run')
  })

  it('reports a finished run as it ended without running anything again', async () => {
    const mock = await startMock([{ text: 'ok' }])
    const { db, task } = taskInTempDir({ goal: 'say ok', workspace: 'ws', providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }] })
    const run = lastJson(await runCli(['run', task, '--json', '--db', db]))
    const again = await runCli(['resume', String(run['runId']), '--json', '--db', db])
    expect(again.code).toBe(0)
    expect(lastJson(again)).toEqual(run)
    expect(mock.requests).toHaveLength(1)
  })
})
