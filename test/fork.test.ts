import { readFileSync, rmSync } from 'node:fs'
import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { storedTrace } from './support/stored-trace.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })

interface Trace {
  run: { id: string; status: string; forkedFrom?: { runId: string; seq: number } }
  transitions: Array<{ seq: number; event: string; to: string }>
  steps: Array<{ step: number; toolCalls: Array<{ arguments: { path: string } }>; results: string[] }>
  forks?: Array<{ runId: string; seq: number }>
}

/** A run of four steps, one file each; its verify passes once d.txt is written. The mock answers by turn. */
const fourSteps = async (dir: string, db: string): Promise<string> => {
  mock = await startMock.scenarios({ replay: 'turn', models: { m: [write('a.txt', 'A'), write('b.txt', 'B'), write('c.txt', 'C'), write('d.txt', 'D')] } })
  const task = writeTask(dir, {
    goal: 'Write a, b, c and d',
    workspace: 'ws',
    providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
    verify: { fileContains: { path: 'd.txt', text: 'D' } },
    approval: 'auto'
  })
  const ran = await runCli(['run', task, '--json', '--db', db])
  expect(ran.code, ran.stderr).toBe(0)
  return lastJson<{ runId: string }>(ran).runId
}

const show = (db: string, runId: string): Promise<Trace> => storedTrace<Trace>(db, runId)
const assistantTurns = (body: unknown): number => (body as { messages: Array<{ role: string }> }).messages.filter((m) => m.role === 'assistant').length

describe('agentvisor fork', () => {
  it('runs a new run on from the state and conversation after step 2 of a 4-step run, and leaves the original as it was', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await fourSteps(dir, db)
    const before = await show(db, runId)
    // 1-3 step 1 (PROVIDER_OK, TOOLS_DONE, VERIFY_FAILED), 4-6 step 2, 7-9 step 3, 10-12 step 4.
    expect(before.transitions).toHaveLength(12)
    expect(before.transitions[5]).toMatchObject({ seq: 6, event: 'VERIFY_FAILED', to: 'dispatching' })
    const sent = mock!.requests.length
    // The workspace is not rewound: what the original wrote after seq 6 is removed here by hand.
    for (const file of ['c.txt', 'd.txt']) rmSync(path.join(dir, 'ws', file))

    const forked = await runCli(['fork', runId, '--at', '6', '--json', '--db', db])
    expect(forked.code, forked.stderr).toBe(0)
    const forkId = lastJson<{ runId: string; status: string }>(forked).runId
    expect(forkId).not.toBe(runId)
    expect(lastJson(forked)).toMatchObject({ status: 'succeeded', steps: 4 })
    expect(forked.stderr).toContain(`agentvisor: run ${forkId} forked from run ${runId} at seq 6`)

    // It asked the model for steps 3 and 4 only, with the conversation of steps 1 and 2.
    const asked = mock!.requests.slice(sent)
    expect(asked.map((request) => assistantTurns(request.body))).toEqual([2, 3])
    const fork = await show(db, forkId)
    expect(fork.run.forkedFrom).toEqual({ runId, seq: 6 })
    expect(fork.transitions.map((t) => t.event)).toEqual(before.transitions.map((t) => t.event))
    expect(fork.steps.map((s) => s.toolCalls[0]!.arguments.path)).toEqual(['a.txt', 'b.txt', 'c.txt', 'd.txt'])

    // The original is as it was, and names its fork.
    const after = await show(db, runId)
    expect(after.transitions).toEqual(before.transitions)
    expect(after.steps).toEqual(before.steps)
    expect(after.forks).toEqual([{ runId: forkId, seq: 6 }])
    expect((await runCli(['show', runId, '--db', db])).stdout).toContain(`forks:\n  ${forkId}  from seq 6`)
    expect((await runCli(['show', forkId, '--db', db])).stdout).toContain(`  forked from: ${runId} at seq 6`)
  })

  it("forked where the model had answered and its tools had not run, performs that step's tools without asking the model again", async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await fourSteps(dir, db)
    const sent = mock!.requests.length
    for (const file of ['b.txt', 'c.txt', 'd.txt']) rmSync(path.join(dir, 'ws', file))
    // Seq 4: step 2 answered (write b.txt), its tools not run yet.
    const forked = await runCli(['fork', runId, '--at', '4', '--json', '--db', db])
    expect(forked.code, forked.stderr).toBe(0)
    const fork = await show(db, lastJson<{ runId: string }>(forked).runId)
    expect(mock!.requests.slice(sent).map((request) => assistantTurns(request.body))).toEqual([2, 3])
    expect(fork.steps[1]).toMatchObject({ step: 2, results: [expect.stringContaining('b.txt')] })
    expect(readFileSync(path.join(dir, 'ws', 'b.txt'), 'utf8')).toBe('B')
    expect(fork.transitions.slice(0, 5).map((t) => t.event)).toEqual(['PROVIDER_OK', 'TOOLS_DONE', 'VERIFY_FAILED', 'PROVIDER_OK', 'TOOLS_DONE'])
  })

  it('refuses a seq the run had ended at or that it does not have, and a missing or bad --at, with one line and exit 2', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await fourSteps(dir, db)
    const cases: Array<[string[], string]> = [
      [
        ['--at', '12'],
        `agentvisor: run ${runId} cannot be forked at seq 12: the run had ended then (finished.succeeded): continue it with agentvisor send instead`
      ],
      [['--at', '13'], `agentvisor: run ${runId} cannot be forked at seq 13: the seq must be 1 to 12`],
      [['--at', '0'], 'agentvisor: --at must be a transition\'s seq, a whole number from 1 (got "0")'],
      [[], 'agentvisor: fork needs --at SEQ: the transition whose state the fork starts from (agentvisor show RUN lists them)']
    ]
    for (const [flags, line] of cases) {
      const refused = await runCli(['fork', runId, ...flags, '--db', db])
      expect(refused.code, flags.join(' ')).toBe(2)
      expect(refused.stderr).toBe(`${line}\n`)
    }
    const unknown = await runCli(['fork', 'no-such-run', '--at', '1', '--db', db])
    expect(unknown.stderr).toBe('agentvisor: no run with id no-such-run\n')
    const listed = JSON.parse((await runCli(['runs', '--json', '--db', db])).stdout) as unknown[]
    expect(listed).toHaveLength(1)
  })
})
