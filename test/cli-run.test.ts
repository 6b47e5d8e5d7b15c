import { existsSync, readFileSync, symlinkSync, writeFileSync, mkdirSync, readdirSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import * as path from 'node:path'
import { Agentvisor } from '@agentvisor/actors'
import { openStore } from '@agentvisor/store'
import type { MockLlm } from '@agentvisor/cli'
import { TOO_DEEP_ARGUMENTS } from '@agentvisor/core'
import { Effect } from 'effect'
import { describe, expect, it } from 'vitest'
import { loadRunView } from '../packages/cli/src/inspector/run-view.js'
import { lastJson, runCli, taskInTempDir, tempDir, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { storedTrace } from './support/stored-trace.js'

const startMock = mockLlmPerTest('test-model')

const taskFor = (baseUrl: string, overrides: Record<string, unknown> = {}) => ({
  goal: 'Write DONE into out.txt',
  workspace: 'ws',
  providers: [{ name: 'primary', kind: 'openai', baseUrl, model: 'test-model' }],
  verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
  limits: { maxSteps: 5, timeoutMs: 60_000 },
  approval: 'auto',
  ...overrides
})

/** The task over the OpenAI adapter, streaming or not: each such test runs once each way. */
const openaiTask = (baseUrl: string, stream: boolean) =>
  taskFor(baseUrl, { providers: [{ name: 'primary', kind: 'openai', baseUrl, model: 'test-model', stream }] })

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
      const llm = await startMock([{ text: 'Writing it.', toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE\n' } }] }])
      const { dir, db, task } = taskInTempDir(openaiTask(llm.url, stream))

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
      expect(trace.steps[0]!.toolCalls).toEqual([
        { name: 'write_file', arguments: { path: 'out.txt', content: 'DONE\n' }, source: 'builtin', effect: 'idempotent' }
      ])
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
      {
        toolCalls: [
          { name: 'write_file', arguments: '{"path": "out.txt", "content": ' },
          { name: 'teleport', arguments: {} }
        ]
      },
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
    const task = writeTask(
      dir,
      taskFor(llm.url, { providers: [{ name: 'primary', kind: 'openai', baseUrl: llm.url, model: 'test-model', apiKeyEnv: 'AV_TEST_KEY' }] })
    )
    const run = await runCli(['run', task, '--json', '--db', db], { env: { AV_TEST_KEY: key } })
    expect(run.code, run.stderr).toBe(0)
    expect(llm.requests[0]!.hasAuthorization).toBe(true)
    for (const file of readdirSync(dir).filter((f) => f.startsWith('av.db'))) {
      expect(readFileSync(path.join(dir, file)).includes(key), file).toBe(false)
    }
    expect(run.stderr + run.stdout).not.toContain(key)
  })

  it('exits 2 naming the variable when the first provider lacks its key, before any run exists, and warns of a later one', async () => {
    const llm = await startMock([writeDone])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const primary = { name: 'primary', kind: 'openai', baseUrl: llm.url, model: 'test-model', apiKeyEnv: 'AV_UNSET_KEY' }
    const task = writeTask(dir, taskFor(llm.url, { providers: [primary] }))
    const run = await runCli(['run', task, '--json', '--db', db], { env: { AV_UNSET_KEY: '' } })
    expect(run.code).toBe(2)
    expect(run.stderr).toBe('agentvisor: providers.0.apiKeyEnv: AV_UNSET_KEY is not set (provider "primary" needs it): set it in the environment\n')
    expect(existsSync(db)).toBe(false)
    expect(existsSync(path.join(dir, 'ws'))).toBe(false)
    expect(llm.requests).toHaveLength(0)

    // A fallback without its key: the run goes on, warned that falling over to it would fail.
    const withFallback = writeTask(
      dir,
      taskFor(llm.url, {
        providers: [
          { ...primary, name: 'main', apiKeyEnv: 'AV_SET_KEY' },
          { ...primary, name: 'spare' }
        ]
      }),
      'fallback.json'
    )
    const warned = await runCli(['run', withFallback, '--json', '--db', db], { env: { AV_SET_KEY: 'k-1', AV_UNSET_KEY: '' } })
    expect(warned.code, warned.stderr).toBe(0)
    expect(warned.stderr).toContain(
      'agentvisor: warning: providers.1.apiKeyEnv: AV_UNSET_KEY is not set (provider "spare" needs it); a run that falls over to it fails there (kind auth)\n'
    )
  })
})

/** Tool arguments nested `depth` levels (inside an otherwise good write_file call). */
const deepArguments = (depth: number): string => `{"path":"out.txt","content":"x","extra":${'['.repeat(depth)}${']'.repeat(depth)}}`

describe('tool-call arguments nested past the limit', () => {
  for (const stream of [false, true]) {
    it(`are answered to the model as a malformed call, the run goes on, and show --json works (${stream ? 'streaming' : 'plain'})`, async () => {
      const llm = await startMock([{ toolCalls: [{ name: 'write_file', arguments: deepArguments(100_000) }] }, writeDone])
      const { db, task } = taskInTempDir(openaiTask(llm.url, stream))
      const run = await runCli(['run', task, '--json', '--db', db])
      expect(run.code, run.stderr).toBe(0)
      const result = lastJson(run)
      expect(result).toMatchObject({ status: 'succeeded', steps: 2 })
      const second = llm.requests[1]!.body as {
        messages: Array<{ role: string; content: string | null; tool_calls?: Array<{ function: { arguments: string } }> }>
      }
      expect(second.messages.find((m) => m.role === 'tool')!.content).toBe(
        'Invalid arguments for write_file: nested deeper than 64 levels; send flatter arguments'
      )
      // What the model sent is not replayed to it (nor kept): only the marker.
      expect(second.messages.find((m) => m.tool_calls !== undefined)!.tool_calls![0]!.function.arguments).toBe(TOO_DEEP_ARGUMENTS)
      const show = await runCli(['show', String(result['runId']), '--json', '--db', db])
      expect(show.code, show.stderr).toBe(0)
      expect(lastJson<Trace>(show).steps[0]!.toolCalls).toEqual([
        { name: 'write_file', arguments: TOO_DEEP_ARGUMENTS, source: 'builtin', effect: 'idempotent' }
      ])
    })
  }

  it('from an Anthropic tool_use input are dropped where the reply is decoded', async () => {
    // The mock LLM cannot serialise such an input itself, so this server answers with fixed bodies.
    const message = (content: string) =>
      `{"id":"msg","type":"message","role":"assistant","model":"m","content":[${content}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`
    const toolUse = (input: string) => `{"type":"tool_use","id":"tu_${Math.random().toString(36).slice(2)}","name":"write_file","input":${input}}`
    const answers = [
      message(toolUse(deepArguments(100_000))),
      message(toolUse('{"path":"out.txt","content":"DONE"}')),
      message('{"type":"text","text":"done"}')
    ]
    const received: string[] = []
    const server: Server = createServer((req, res) => {
      let body = ''
      req.on('data', (d: Buffer) => (body += d.toString()))
      req.on('end', () => {
        received.push(body)
        res.writeHead(200, { 'content-type': 'application/json' }).end(answers[received.length - 1] ?? answers[2])
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const dir = tempDir()
      const db = path.join(dir, 'av.db')
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
      const task = writeTask(dir, taskFor(url, { providers: [{ name: 'primary', kind: 'anthropic', baseUrl: url, model: 'm' }] }))
      const run = await runCli(['run', task, '--json', '--db', db])
      expect(run.code, run.stderr).toBe(0)
      expect(lastJson(run)).toMatchObject({ status: 'succeeded', steps: 2 })
      expect(received[1]).toContain('Invalid arguments for write_file: nested deeper than 64 levels')
      const show = await runCli(['show', String(lastJson(run)['runId']), '--json', '--db', db])
      expect(show.code, show.stderr).toBe(0)
      expect(lastJson<Trace>(show).steps[0]!.toolCalls[0]!.arguments).toBe(TOO_DEEP_ARGUMENTS)
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('stored raw (as before the limit) are shown as text by show --json and the inspector, and answered as malformed', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const raw = deepArguments(100_000)
    let calls = 0
    // A provider of the TS API's own skips the adapters' check: what it sends is stored as sent.
    const av = await Agentvisor.open({
      db,
      makeProvider: (config) => ({
        name: config.name,
        kind: 'scripted',
        chat: () =>
          Effect.sync(() => (calls++ === 0 ? { text: '', toolCalls: [{ id: 'c1', name: 'write_file', arguments: raw }] } : { text: 'done', toolCalls: [] }))
      })
    })
    let runId: string
    try {
      const result = await av.run({ goal: 'g', workspace: path.join(dir, 'ws'), approval: 'auto', providers: [{ name: 'p', kind: 'scripted', steps: [] }] })
      expect(result.status).toBe('succeeded')
      runId = result.runId
    } finally {
      await av.close()
    }
    const show = await runCli(['show', runId, '--json', '--db', db])
    expect(show.code, show.stderr).toBe(0)
    const trace = lastJson<Trace>(show)
    expect(trace.steps[0]!.toolCalls[0]!.arguments).toBe(raw)
    expect(trace.steps[0]!.results[0]).toBe('Invalid arguments for write_file: nested deeper than 64 levels; send flatter arguments')
    const text = await runCli(['show', runId, '--db', db])
    expect(text.code, text.stderr).toBe(0)
    const store = await openStore(db)
    try {
      const view = await loadRunView(store.db, runId)
      expect(JSON.parse(JSON.stringify(view)).steps[0].toolCalls[0].arguments).toBe(raw)
    } finally {
      await store.close()
    }
  })
})

describe('a child run that cannot start', () => {
  it('ends failed when its workspace cannot be opened, and its parent goes on at once', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, {
      goal: 'g',
      workspace: 'ws',
      approval: 'auto',
      // Without the fix the parent waits for the child until this deadline.
      limits: { timeoutMs: 120_000 },
      providers: [
        {
          name: 'p',
          kind: 'scripted',
          steps: [
            { toolCalls: [{ name: 'write_file', arguments: { path: 'f.txt', content: 'x' } }] },
            { toolCalls: [{ name: 'spawn_child', arguments: { goal: 'child', workspace: 'f.txt' } }] },
            { text: 'done' }
          ]
        }
      ]
    })
    const run = await runCli(['run', task, '--json', '--db', db])
    expect(run.code, run.stderr).toBe(0)
    const runs = lastJson<Array<{ id: string; status: string; parentId: string | null }>>(await runCli(['runs', '--json', '--db', db]))
    expect(runs.map((r) => r.status).sort()).toEqual(['failed', 'succeeded'])
    const parent = runs.find((r) => r.parentId === null)!
    const trace = await storedTrace<Trace>(db, parent.id)
    expect(trace.steps[1]!.results[0]).toMatch(/^Child run .* failed after 0 steps \(internal: Cannot open workspace .*f\.txt/)
  })
})

describe('resume of a run that has ended', () => {
  it('says it has ended, drives nothing and exits with its status code', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, { goal: 'Say hi', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [{ text: 'hi' }] }] })
    const { runId } = lastJson<{ runId: string }>(await runCli(['run', task, '--json', '--db', db]))
    const before = (await storedTrace<{ transitions: unknown[] }>(db, runId)).transitions.length

    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code).toBe(0)
    expect(resumed.stderr.split('\n')[0]).toBe(
      `agentvisor: run ${runId} has ended (succeeded): there is nothing to resume (agentvisor send ${runId} TEXT continues it with a new turn)`
    )
    expect(resumed.stderr).not.toContain('resuming')
    expect(lastJson(resumed)).toMatchObject({ runId, status: 'succeeded', steps: 1 })
    expect((await storedTrace<{ transitions: unknown[] }>(db, runId)).transitions).toHaveLength(before)
  })
})
