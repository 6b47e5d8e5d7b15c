import { mkdirSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'

// limits.contextTokens (docs/task-file.md, "Long conversations"): a 30-step run reading large
// files never sends a request past the limit, records what it elided, and elides the same after a
// pause and a resume as without one.

const MODEL = 'long-model'
const FILES = 30
const SIZE = 4000
const LIMIT = 6000

const startMock = mockLlmPerTest(MODEL)
let mock: MockLlm | undefined

interface Body {
  readonly messages: ReadonlyArray<{
    readonly role: string
    readonly content?: string | null
    readonly tool_calls?: ReadonlyArray<{ function: { name: string; arguments: string } }>
  }>
  readonly tools?: unknown
}

/** A request's prompt in the estimate the limit is held to: four characters a token over the messages and the tools' specs. */
const estimate = (body: Body): number => {
  let characters = 0
  for (const m of body.messages) {
    characters += (m.content ?? '').length + 8
    for (const call of m.tool_calls ?? []) characters += call.function.name.length + call.function.arguments.length + 16
  }
  return Math.ceil(characters / 4)
}

const script = (pauseAt?: number) => [
  ...Array.from({ length: FILES }, (_, i) =>
    i === pauseAt
      ? { toolCalls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: `read ${i} files` } }] }
      : { toolCalls: [{ name: 'read_file', arguments: { path: `data/f${i}.txt` } }] }
  ),
  { text: 'read them all' }
]

const setup = (dir: string, baseUrl: string, approval: string) => {
  mkdirSync(path.join(dir, 'ws', 'data'), { recursive: true })
  for (let i = 0; i < FILES; i++) writeFileSync(path.join(dir, 'ws', 'data', `f${i}.txt`), `${i}:`.padEnd(SIZE, 'x'))
  return writeTask(dir, {
    goal: 'Read every file under data/',
    workspace: 'ws',
    providers: [{ name: 'p', kind: 'openai', baseUrl, model: MODEL }],
    limits: { maxSteps: FILES + 2, contextTokens: LIMIT, dispatchCeiling: 100 },
    policy: { layers: [{ name: 'team', allow: { read: ['**'] }, ask: { write: ['**'] } }] },
    approval
  })
}

describe('long conversations', () => {
  it('never sends a request above contextTokens, eliding the oldest tool results, and records each elision', async () => {
    mock = await startMock(script())
    const dir = tempDir()
    const task = setup(dir, mock.url, 'auto')
    const db = path.join(dir, 'av.db')
    const ran = await runCli(['run', task, '--json', '--db', db])
    expect(ran.code, ran.stderr).toBe(0)
    const bodies = mock.requests.map((r) => r.body as Body)
    expect(bodies).toHaveLength(FILES + 1)
    for (const body of bodies) expect(estimate(body)).toBeLessThanOrEqual(LIMIT)
    // Without the limit the last request would carry every file: 30 x 4,000 characters.
    expect(bodies.at(-1)!.messages.filter((m) => m.role === 'tool' && (m.content ?? '').startsWith('[elided')).length).toBeGreaterThan(20)
    // The goal, and the last two steps' results, are whole.
    const last = bodies.at(-1)!.messages
    expect(last[1]).toMatchObject({ role: 'user', content: expect.stringContaining('Read every file under data/') })
    const tools = last.filter((m) => m.role === 'tool')
    expect(tools.slice(-2).every((m) => (m.content ?? '').length >= SIZE)).toBe(true)
    expect(tools[0]!.content).toBe(
      '[elided to fit the context window: the read_file data/f0.txt result of step 1, 4000 characters; call the tool again if you need it]'
    )
    const trace = lastJson<{ steps: Array<{ step: number; promptSummary: string }> }>(
      await runCli(['show', lastJson<{ runId: string }>(ran).runId, '--json', '--db', db])
    )
    expect(trace.steps.at(-1)!.promptSummary).toMatch(/elided \d+ tool results: read_file data\/f0.txt \(step 1, 4000 chars\)/)
    expect(trace.steps[0]!.promptSummary).not.toContain('elided')
  })

  it('elides the same after a pause and a resume as in a run that never stopped', async () => {
    const straight = await startMock(script(18))
    const straightDir = tempDir()
    const ran = await runCli(['run', setup(straightDir, straight.url, 'auto'), '--json', '--db', path.join(straightDir, 'av.db')])
    expect(ran.code, ran.stderr).toBe(0)
    const expected = straight.requests.map((r) => (r.body as Body).messages)
    await straight.close()

    mock = await startMock(script(18))
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const paused = await runCli(['run', setup(dir, mock.url, 'defer'), '--json', '--db', db])
    expect(paused.code, paused.stderr).toBe(3)
    const { runId } = lastJson<{ runId: string }>(paused)
    expect((await runCli(['approve', runId, '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    const sent = mock.requests.map((r) => (r.body as Body).messages)
    expect(sent).toHaveLength(expected.length)
    expect(sent).toEqual(expected)
    // And the requests after the resume did elide: what they share is the elision, not its absence.
    const elidedAfterResume = sent.slice(19).map((messages) => messages.filter((m) => (m.content ?? '').startsWith('[elided')).length)
    expect(Math.min(...elidedAfterResume)).toBeGreaterThan(5)
  })
})
