import { readFileSync } from 'node:fs'
import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, mockTask, runCli, tempDir, writeTask } from './support/cli.js'
import { freshDatabase } from './support/pg.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

interface Trace {
  run: { id: string; status: string; goal: string }
  steps: Array<{ step: number; promptSummary: string; results: string[] }>
}

describe('text with NUL bytes in the store (docs/deploy.md, "Text in the store")', () => {
  it('on PostgreSQL, runs an exec that prints NUL bytes to success, and show --json gives the output back with them', async () => {
    // Step 1 prints NUL bytes, so the prompt of step 2 quotes them; step 2 does the work.
    const steps = [
      { toolCalls: [{ name: 'exec', arguments: { command: "printf 'a\\0b'" } }] },
      { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE\n' } }] }
    ]
    mock = await startMock(steps)
    const dir = tempDir('agentvisor-pg-nul-')
    const file = writeTask(dir, mockTask(mock.url, {}, 'primary'))
    const db = await freshDatabase()
    const cli = (args: string[]) => runCli([...args, '--db', db.url], { cwd: dir, env: { AGENTVISOR_DB: '' } })

    const run = await cli(['run', file, '--json'])
    expect(run.code, run.stderr).toBe(0)
    const { runId, status } = lastJson<{ runId: string; status: string }>(run)
    expect(status).toBe('succeeded')
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE\n')

    const show = await cli(['show', runId, '--json'])
    expect(show.code, show.stderr).toBe(0)
    // The NUL comes back in JSON as \u0000, as JSON.stringify writes it.
    expect(show.stdout).toContain('stdout:\\na\\u0000b\\n')
    const trace = lastJson<Trace>(show)
    expect(trace.steps[0]!.results[0]).toContain('stdout:\na\u0000b\n')
    expect(trace.steps[1]!.promptSummary).toContain('a\u0000b')
    // What the model was told at step 2 had the NUL too.
    expect(JSON.stringify(mock.requests[1])).toContain('a\\u0000b')
    // The database holds it escaped, never raw (PostgreSQL text cannot).
    const [row] = await db.query<{ prompt_summary: string }>('select prompt_summary from steps where run_id = $1 and step = 2', [runId])
    expect(row!.prompt_summary).toContain('a\u0010\uFDD0b')
  })

  it('on SQLite, lists and shows a goal holding NUL bytes and the escape character byte for byte', async () => {
    const dir = tempDir('agentvisor-sqlite-nul-')
    const db = path.join(dir, 'av.db')
    const goal = 'Write DONE \u0000 into \u0010 out.txt \uFDD0'
    const task = writeTask(dir, {
      goal,
      workspace: 'ws',
      providers: [{ name: 'script', kind: 'scripted', steps: [{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }] }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      approval: 'auto'
    })
    const run = await runCli(['run', task, '--json', '--db', db])
    expect(run.code, run.stderr).toBe(0)
    const { runId } = lastJson<{ runId: string }>(run)

    const listed = await runCli(['runs', '--json', '--db', db])
    expect(listed.code, listed.stderr).toBe(0)
    expect(lastJson(listed)).toEqual([expect.objectContaining({ id: runId, goal })])
    expect(listed.stdout).toContain(JSON.stringify(goal))
    const show = await runCli(['show', runId, '--json', '--db', db])
    expect(lastJson<Trace>(show).run.goal).toBe(goal)
  })
})
