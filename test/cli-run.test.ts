import { existsSync, readFileSync, symlinkSync, writeFileSync, mkdirSync, readdirSync } from 'node:fs'
import * as path from 'node:path'
import { startMockLlm, type MockLlm } from '@agentvisor/cli'
import { afterEach, describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'

let mock: MockLlm | undefined
afterEach(async () => {
  await mock?.close()
  mock = undefined
})

const startMock = async (steps: unknown[], model = 'test-model'): Promise<MockLlm> => {
  mock = await startMockLlm({ scenarios: { models: { [model]: steps } } as never, port: 0 })
  return mock
}

const taskFor = (baseUrl: string, overrides: Record<string, unknown> = {}) => ({
  goal: 'Write DONE into out.txt',
  workspace: 'ws',
  providers: [{ name: 'primary', kind: 'openai', baseUrl, model: 'test-model' }],
  verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
  limits: { maxSteps: 5, timeoutMs: 60_000 },
  approval: 'auto',
  ...overrides
})

const writeDone = { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE\n' } }] }

interface Trace {
  run: { id: string; status: string }
  transitions: Array<{ seq: number; from: string; event: string; to: string }>
  steps: Array<{ step: number; toolCalls: Array<{ name: string; arguments: unknown }>; results: string[] }>
  receipts: Array<{ step: number; attempts: Array<{ provider: string; outcome: string }>; winner: number | null }>
}

const requestText = (m: MockLlm): string => m.requests.map((r) => JSON.stringify(r.body)).join('\n')

describe('agentvisor run against the mock LLM over HTTP', () => {
  for (const stream of [false, true]) {
    it(`writes the file, verifies the contract and ends succeeded (${stream ? 'streaming' : 'plain'})`, async () => {
      const llm = await startMock([
        { text: 'Writing it.', toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE\n' } }] }
      ])
      const dir = tempDir()
      const db = path.join(dir, 'av.db')
      const task = writeTask(dir, taskFor(llm.url, { providers: [{ name: 'primary', kind: 'openai', baseUrl: llm.url, model: 'test-model', stream }] }))

      const run = await runCli(['run', task, '--json', '--db', db])
      expect(run.code, run.stderr).toBe(0)
      const result = lastJson(run)
      expect(result).toMatchObject({ status: 'succeeded', steps: 1 })
      expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE\n')
      expect(llm.requests).toHaveLength(1)
      expect(llm.requests[0]!.stream).toBe(stream)

      const show = await runCli(['show', String(result['runId']), '--json', '--db', db])
      expect(show.code).toBe(0)
      const trace = lastJson<Trace>(show)
      expect(trace.run).toMatchObject({ id: result['runId'], status: 'succeeded' })
      const path_ = trace.transitions.map((t) => `${t.from}>${t.to}`)
      expect(path_).toEqual(['dispatching>acting', 'acting>verifying', 'verifying>finished.succeeded'])
      expect(trace.transitions.map((t) => t.seq)).toEqual([1, 2, 3])
      expect(trace.steps[0]!.toolCalls).toEqual([{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE\n' } }])
      expect(trace.receipts).toEqual([
        expect.objectContaining({ step: 1, winner: 0, attempts: [expect.objectContaining({ provider: 'primary', reason: 'initial', outcome: 'ok' })] })
      ])
    })
  }

  it('ends step_cap with exit 1 when maxSteps is reached', async () => {
    const llm = await startMock([
      { toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] },
      { toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] },
      { toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] }
    ])
    const dir = tempDir()
    const task = writeTask(dir, taskFor(llm.url, { limits: { maxSteps: 2 } }))
    const run = await runCli(['run', task, '--json', '--db', path.join(dir, 'av.db')])
    expect(run.code).toBe(1)
    expect(lastJson(run)).toMatchObject({ status: 'step_cap', steps: 2 })
    expect(llm.requests).toHaveLength(2)
  })

  it('refuses path escapes, feeds the refusal back, goes on, and never sends the refused content', async () => {
    const dir = tempDir()
    const secret = path.join(dir, 'secret.txt')
    writeFileSync(secret, 'TOPSECRET-7f3a')
    mkdirSync(path.join(dir, 'ws'))
    symlinkSync(secret, path.join(dir, 'ws', 'link.txt'))
    const llm = await startMock([
      {
        toolCalls: [
          { name: 'read_file', arguments: { path: '../secret.txt' } },
          { name: 'read_file', arguments: { path: secret } },
          { name: 'read_file', arguments: { path: 'link.txt' } },
          { name: 'write_file', arguments: { path: '../escaped.txt', content: 'x' } }
        ]
      },
      writeDone
    ])
    const task = writeTask(dir, taskFor(llm.url))
    const run = await runCli(['run', task, '--json', '--db', path.join(dir, 'av.db')])
    expect(run.code, run.stderr).toBe(0)
    expect(lastJson(run)).toMatchObject({ status: 'succeeded', steps: 2 })
    expect(existsSync(path.join(dir, 'escaped.txt'))).toBe(false)
    const sent = requestText(llm)
    expect(sent).not.toContain('TOPSECRET-7f3a')
    expect(sent.match(/Path escapes the workspace boundary/g)).toHaveLength(4)
  })

  it('feeds malformed tool arguments and unknown tools back to the model and goes on', async () => {
    const llm = await startMock([
      { toolCalls: [{ name: 'write_file', arguments: '{"path": "out.txt", "content": ' }, { name: 'teleport', arguments: {} }] },
      writeDone
    ])
    const dir = tempDir()
    const task = writeTask(dir, taskFor(llm.url))
    const run = await runCli(['run', task, '--json', '--db', path.join(dir, 'av.db')])
    expect(run.code, run.stderr).toBe(0)
    expect(lastJson(run)).toMatchObject({ status: 'succeeded', steps: 2 })
    const second = llm.requests[1]!.body as { messages: Array<{ role: string; content: string }> }
    const toolAnswers = second.messages.filter((m) => m.role === 'tool').map((m) => m.content)
    expect(toolAnswers[0]).toMatch(/^Invalid arguments for write_file/)
    expect(toolAnswers[1]).toMatch(/^Unknown tool "teleport"/)
  })

  it('tells the model why the contract is not met when it stops early, then succeeds', async () => {
    const llm = await startMock([{ text: 'All done!' }, writeDone])
    const dir = tempDir()
    const task = writeTask(dir, taskFor(llm.url))
    const run = await runCli(['run', task, '--json', '--db', path.join(dir, 'av.db')])
    expect(run.code, run.stderr).toBe(0)
    const second = llm.requests[1]!.body as { messages: Array<{ role: string; content: string }> }
    expect(second.messages.at(-1)).toMatchObject({ role: 'user' })
    expect(second.messages.at(-1)!.content).toContain('out.txt')
  })

  it('never writes the API key value to the store, while sending it to the provider', async () => {
    const llm = await startMock([writeDone])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const key = 'sk-test-0123456789-secret-value'
    const task = writeTask(dir, taskFor(llm.url, { providers: [{ name: 'primary', kind: 'openai', baseUrl: llm.url, model: 'test-model', apiKeyEnv: 'AV_TEST_KEY' }] }))
    const run = await runCli(['run', task, '--json', '--db', db], { env: { AV_TEST_KEY: key } })
    expect(run.code, run.stderr).toBe(0)
    expect(llm.requests[0]!.hasAuthorization).toBe(true)
    for (const file of readdirSync(dir).filter((f) => f.startsWith('av.db'))) {
      expect(readFileSync(path.join(dir, file)).includes(key), file).toBe(false)
    }
    expect(run.stderr + run.stdout).not.toContain(key)
  })

  it('fails with kind auth and exit 1 when the named key variable is not set, without calling the model', async () => {
    const llm = await startMock([writeDone])
    const dir = tempDir()
    const task = writeTask(dir, taskFor(llm.url, { providers: [{ name: 'primary', kind: 'openai', baseUrl: llm.url, model: 'test-model', apiKeyEnv: 'AV_UNSET_KEY' }] }))
    const run = await runCli(['run', task, '--json', '--db', path.join(dir, 'av.db')], { env: { AV_UNSET_KEY: '' } })
    expect(run.code).toBe(1)
    expect(lastJson(run)).toMatchObject({ status: 'failed', error: { kind: 'auth', provider: 'primary' } })
    expect(llm.requests).toHaveLength(0)
  })
})

describe('agentvisor run with bad input', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['malformed JSON', '{"goal": "x", ', /not valid JSON/],
    ['a missing goal', JSON.stringify({ workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }] }), /goal/],
    ['an unknown provider kind', JSON.stringify({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'gemini', model: 'm' }] }), /providers\.0\.kind/],
    ['a negative maxSteps', JSON.stringify({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }], limits: { maxSteps: -1 } }), /limits\.maxSteps/]
  ]
  for (const [what, text, pattern] of cases) {
    it(`exits 2 with one clear line for ${what}`, async () => {
      const dir = tempDir()
      const task = writeTask(dir, text)
      const run = await runCli(['run', task, '--db', path.join(dir, 'av.db')])
      expect(run.code).toBe(2)
      const lines = run.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(pattern)
      expect(run.stderr).not.toMatch(/\n\s+at /)
      expect(existsSync(path.join(dir, 'ws'))).toBe(false)
    })
  }

  it('exits 2 naming a missing task file', async () => {
    const dir = tempDir()
    const run = await runCli(['run', path.join(dir, 'nope.json'), '--db', path.join(dir, 'av.db')])
    expect(run.code).toBe(2)
    expect(run.stderr).toMatch(/nope\.json: cannot read task file: ENOENT/)
  })

  it('exits 2 for an unknown command and an unknown flag', async () => {
    expect((await runCli(['frobnicate'])).code).toBe(2)
    const bad = await runCli(['runs', '--colour'])
    expect(bad.code).toBe(2)
    expect(bad.stderr.trim().split('\n')).toHaveLength(1)
  })
})
