import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })

describe('the human show and runs', () => {
  it("print a paused run's requests with their ids, its policy events and its children, and each child's parent", async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [{ name: 'spawn_child', arguments: { goal: 'Write part A' } }] }, write('secret.txt', 'S'), write('out.txt', 'DONE')] },
      goals: { 'Write part A': [write('part.txt', 'A'), { text: 'part written' }] }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, {
      goal: 'Delegate, then write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      policy: { layers: [{ name: 'team', allow: { write: ['part.txt'] }, ask: { write: ['out.txt'] }, deny: { write: ['secret.txt'] } }] },
      approval: 'defer'
    })
    const ran = await runCli(['run', task, '--json', '--db', db])
    expect(ran.code, ran.stderr).toBe(3)
    const runId = lastJson<{ runId: string }>(ran).runId
    const trace = lastJson<{ approvals: Array<{ id: string }>; children: Array<{ id: string }> }>(await runCli(['show', runId, '--json', '--db', db]))
    const requestId = trace.approvals[0]!.id
    const childId = trace.children[0]!.id

    const shown = await runCli(['show', runId, '--db', db])
    expect(shown.code).toBe(0)
    const lines = shown.stdout.split('\n')
    expect(lines).toContain('requests:')
    expect(lines).toContain(`  ${requestId}  step 3  pending  write out.txt (rule "out.txt" in layer "team")`)
    expect(lines).toContain(`  (agentvisor approve ${runId} REQUEST [--deny], then agentvisor resume ${runId})`)
    expect(lines).toContain('policy:')
    expect(lines.some((line) => /^ {2}step 2 {2}deny write secret\.txt {2}rule "secret\.txt" in layer "team", /.test(line))).toBe(true)
    expect(lines).toContain('children:')
    expect(lines).toContain(`  ${childId}  succeeded`)

    const listed = await runCli(['runs', '--db', db])
    expect(listed.stdout).toMatch(new RegExp(`^${childId}  succeeded\\s+\\S+  ${runId.slice(0, 8)}  Write part A$`, 'm'))
    expect(listed.stdout).toMatch(new RegExp(`^${runId}  awaiting_approval\\s+\\S+  -\\s+Delegate`, 'm'))
  })
})
