import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { storedTrace } from './support/stored-trace.js'

// Follow-ups (docs/policy.md, "Follow-ups"): `agentvisor send` continues a finished run as a new
// turn under the same id, the model getting the whole conversation so far and the new message.

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const write = (file: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: file, content } }] })

interface Body {
  readonly messages: ReadonlyArray<{
    readonly role: string
    readonly content?: string | null
    readonly tool_calls?: ReadonlyArray<{ function: { arguments: string } }>
  }>
}
const messagesOf = (request: number) => (mock!.requests[request]!.body as Body).messages

describe('follow-ups', () => {
  it('runs a second and a third turn under the same run id, each starting from the whole conversation and the new message', async () => {
    mock = await startMock.scenarios({
      models: {
        m: [write('a.txt', 'one'), { text: 'Wrote a.txt.' }, write('b.txt', 'two'), { text: 'Wrote b.txt too.' }, { text: 'They hold one and two.' }]
      }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, {
      goal: 'Write one into a.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      limits: { maxSteps: 2 },
      approval: 'auto'
    })
    const first = await runCli(['run', task, '--json', '--db', db])
    expect(first.code, first.stderr).toBe(0)
    const { runId } = lastJson<{ runId: string }>(first)
    expect(mock.requests).toHaveLength(2)

    const second = await runCli(['send', runId, 'Now write two into b.txt', '--json', '--db', db])
    expect(second.code, second.stderr).toBe(0)
    // Same run, two more steps: a fresh maxSteps of 2 for the turn (the first turn used both).
    expect(lastJson(second)).toMatchObject({ runId, status: 'succeeded', steps: 4, output: 'Wrote b.txt too.' })
    expect(readFileSync(path.join(dir, 'ws', 'b.txt'), 'utf8')).toBe('two')
    // The turn's first request: the whole first turn, then the new message.
    const turnTwo = messagesOf(2)
    expect(turnTwo.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'user'])
    expect(turnTwo[2]!.tool_calls?.[0]?.function.arguments).toContain('a.txt')
    expect(turnTwo[4]!.content).toBe('Wrote a.txt.')
    expect(turnTwo[5]!.content).toBe('Now write two into b.txt')

    // A third turn, begun from the store alone: the second message sits where it was.
    const third = await runCli(['send', runId, 'What do the files hold?', '--json', '--db', db])
    expect(third.code, third.stderr).toBe(0)
    const turnThree = messagesOf(4)
    expect(turnThree.map((m) => m.content ?? '')).toContain('Now write two into b.txt')
    expect(turnThree.at(-1)!.content).toBe('What do the files hold?')
    expect(turnThree.slice(0, turnTwo.length).map((m) => m.role)).toEqual(turnTwo.map((m) => m.role))

    const trace = await storedTrace<{ run: { id: string; status: string }; turns: Array<{ turn: number; firstStep: number; message?: string }> }>(db, runId)
    expect(trace.run).toMatchObject({ id: runId, status: 'succeeded' })
    expect(trace.turns).toEqual([
      expect.objectContaining({ turn: 1, firstStep: 1 }),
      expect.objectContaining({ turn: 2, firstStep: 3, message: 'Now write two into b.txt' }),
      expect.objectContaining({ turn: 3, firstStep: 5, message: 'What do the files hold?' })
    ])
    const runs = JSON.parse((await runCli(['runs', '--json', '--db', db])).stdout) as unknown[]
    expect(runs).toHaveLength(1)
  })

  it("gives as output the answer that ended the last turn: never an earlier step's text, nothing when that answer had none", async () => {
    mock = await startMock.scenarios({
      models: {
        m: [
          { text: 'I will write a plan first.', ...write('a.txt', 'one') },
          { text: 'All done: a.txt holds one.' },
          { text: 'Writing b.txt now.', ...write('b.txt', 'two') },
          { text: 'All done: b.txt holds two.' },
          write('c.txt', 'three'),
          { text: '' }
        ]
      }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, {
      goal: 'Write one into a.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      approval: 'auto'
    })
    const first = await runCli(['run', task, '--json', '--db', db])
    expect(first.code, first.stderr).toBe(0)
    const { runId } = lastJson<{ runId: string }>(first)
    expect(lastJson(first)).toMatchObject({ status: 'succeeded', steps: 2, output: 'All done: a.txt holds one.' })

    const second = await runCli(['send', runId, 'Now write two into b.txt', '--json', '--db', db])
    expect(lastJson(second)).toMatchObject({ status: 'succeeded', steps: 4, output: 'All done: b.txt holds two.' })
    const shown = await storedTrace<{ output?: unknown }>(db, runId)
    expect(shown.output).toBe('All done: b.txt holds two.')

    // The third turn ends on an answer without text: no output, not the second turn's.
    const third = await runCli(['send', runId, 'And three into c.txt', '--json', '--db', db])
    expect(third.code, third.stderr).toBe(0)
    const ended = lastJson<{ status: string; steps: number; output?: unknown }>(third)
    expect(ended).toMatchObject({ status: 'succeeded', steps: 6 })
    expect(ended).not.toHaveProperty('output')
    expect(readFileSync(path.join(dir, 'ws', 'c.txt'), 'utf8')).toBe('three')
    expect(await storedTrace<{ output?: unknown }>(db, runId)).not.toHaveProperty('output')
  })

  it('refuses a follow-up to a run that has not finished, exit 2, and changes nothing', async () => {
    mock = await startMock([write('a.txt', 'one')])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, {
      goal: 'Write one into a.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      approval: 'defer'
    })
    const paused = await runCli(['run', task, '--json', '--db', db])
    expect(paused.code).toBe(3)
    const { runId } = lastJson<{ runId: string }>(paused)
    const refused = await runCli(['send', runId, 'more', '--db', db])
    expect(refused.code).toBe(2)
    expect(refused.stderr.trim().split('\n').at(-1)).toBe(
      `agentvisor: run ${runId} cannot take a follow-up: it is awaiting_approval: a follow-up continues a finished run`
    )
    expect(existsSync(path.join(dir, 'ws', 'a.txt'))).toBe(false)
    expect(mock.requests).toHaveLength(1)
  })
})
