import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, symlinkSync, writeFileSync, mkdirSync, readdirSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { homedir } from 'node:os'
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

describe('agentvisor run with bad input', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['malformed JSON', '{"goal": "x", ', /not valid JSON/],
    ['a missing goal', JSON.stringify({ workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }] }), /goal/],
    [
      'an unknown provider kind',
      JSON.stringify({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'gemini', model: 'm' }] }),
      /^agentvisor: .*: providers\.0\.kind: must be one of "openai", "anthropic", "scripted", got "gemini"$/
    ],
    [
      'an unknown approval mode',
      JSON.stringify({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }], approval: 'sometimes' }),
      /^agentvisor: .*: approval: must be one of "prompt", "defer", "auto", got "sometimes"$/
    ],
    [
      'a negative maxSteps',
      JSON.stringify({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }], limits: { maxSteps: -1 } }),
      /limits\.maxSteps/
    ]
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

const scripted = [{ name: 'p', kind: 'scripted', steps: [] }]

describe('agentvisor run refuses bad input with exit 2, one line and nothing left in the store', () => {
  const json = (task: unknown) => (dir: string) => writeTask(dir, task)
  const text = (name: string, content: string) => (dir: string) => writeTask(dir, content, name)
  let allOf: unknown = { fileContains: { path: 'a', text: 'b' } }
  for (let i = 0; i < 1000; i++) allOf = { allOf: [allOf] }
  const cases: Array<[string, (dir: string) => string, RegExp]> = [
    ['the filesystem root as workspace', json({ goal: 'g', workspace: '/', providers: scripted }), /workspace: \/ is the filesystem root/],
    ['the home folder as workspace', json({ goal: 'g', workspace: homedir(), providers: scripted }), /workspace: .* is your home folder/],
    [
      'a lineage in the task file',
      json({ goal: 'g', workspace: 'ws', providers: scripted, lineage: { rootId: 'r', parentId: 'p', depth: 1, treeDispatchCeiling: 1e6 } }),
      /lineage: is set by agentvisor/
    ],
    ['an empty YAML file', text('task.yaml', ''), /the task must be an object with goal, workspace and providers, got nothing$/],
    ['a top-level YAML list', text('task.yaml', '- goal: g\n'), /must be an object with goal, workspace and providers, got a list$/],
    ['a top-level YAML string', text('task.yaml', 'just a goal\n'), /got a string$/],
    ['a JSON null', text('task.json', 'null'), /got nothing$/],
    ['a whitespace-only goal', json({ goal: '   ', workspace: 'ws', providers: scripted }), /goal: must have non-space text/],
    [
      'a file: baseUrl',
      json({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'openai', model: 'm', baseUrl: 'file:///etc/passwd' }] }),
      /providers\.0\.baseUrl: must be an http:\/\/ or https:\/\/ URL/
    ],
    [
      'an attemptTimeoutMs past the timer range',
      json({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [], attemptTimeoutMs: 2 ** 31 }] }),
      /providers\.0\.attemptTimeoutMs: must be at most 2147483647/
    ],
    [
      'a timeoutMs past the timer range',
      json({ goal: 'g', workspace: 'ws', providers: scripted, limits: { timeoutMs: 1e12 } }),
      /limits\.timeoutMs: must be at most/
    ],
    ['a YAML file that also draws a YAML warning', text('task.yaml', 'goal: !nosuchtag g\nworkspace: ws\n'), /providers: is missing/],
    // Written as text: JSON.stringify itself overflows at this depth.
    [
      'a task file 200,000 levels deep',
      text('task.json', `{"goal":${'{"a":'.repeat(200_000)}"g"${'}'.repeat(200_000)},"workspace":"ws","providers":${JSON.stringify(scripted)}}`),
      /goal: nests deeper than 64 levels/
    ],
    ['an allOf 1,000 deep', json({ goal: 'g', workspace: 'ws', providers: scripted, verify: allOf }), /verify: nests deeper than 64 levels/],
    [
      'a FIFO as the task file',
      (dir) => {
        const fifo = path.join(dir, 'task.json')
        execFileSync('mkfifo', [fifo])
        return fifo
      },
      /task\.json: cannot read task file: not a regular file/
    ],
    [
      'a workspace that names a file',
      (dir) => {
        writeFileSync(path.join(dir, 'afile'), 'x')
        return writeTask(dir, { goal: 'g', workspace: 'afile', providers: scripted })
      },
      /Cannot open workspace .*afile/
    ],
    [
      'a workspace that cannot be created',
      (dir) => {
        writeFileSync(path.join(dir, 'afile'), 'x')
        return writeTask(dir, { goal: 'g', workspace: 'afile/ws', providers: scripted })
      },
      /Cannot open workspace .*afile\/ws/
    ]
  ]
  for (const [what, make, pattern] of cases) {
    it(`for ${what}`, async () => {
      const dir = tempDir()
      const db = path.join(dir, 'av.db')
      const task = make(dir)
      const run = await runCli(['run', task, '--json', '--db', db])
      expect(run.code, run.stderr).toBe(2)
      const lines = run.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(pattern)
      expect(run.stderr).not.toMatch(/\n\s+at |internal error/)
      expect(lastJson(run)).toEqual({ error: { kind: 'input', message: lines[0]!.replace(/^agentvisor: /, '') } })
      // No run was made: the store holds none, or was not even created.
      if (existsSync(db)) expect(lastJson<unknown[]>(await runCli(['runs', '--json', '--db', db]))).toEqual([])
    })
  }
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
    const trace = lastJson<Trace>(await runCli(['show', parent.id, '--json', '--db', db]))
    expect(trace.steps[1]!.results[0]).toMatch(/^Child run .* failed after 0 steps \(internal: Cannot open workspace .*f\.txt/)
  })
})

describe('approve --edit', () => {
  it('refuses edited arguments nested past 64 levels with exit 2 and one line', async () => {
    const dir = tempDir()
    const edit = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`
    const run = await runCli(['approve', 'some-run', '--edit', edit, '--json', '--db', path.join(dir, 'av.db')])
    expect(run.code).toBe(2)
    expect(run.stderr).toBe('agentvisor: --edit nests deeper than 64 levels\n')
    expect(lastJson(run)).toEqual({ error: { kind: 'input', message: '--edit nests deeper than 64 levels' } })
  })
})

describe('commands about runs that exist, on a path with no store', () => {
  const commands: ReadonlyArray<ReadonlyArray<string>> = [
    ['runs'],
    ['runs', '--json'],
    ['show', 'r1'],
    ['watch', 'r1'],
    ['inspect'],
    ['approve', 'r1'],
    ['answer', 'r1', 'yes'],
    ['cancel', 'r1'],
    ['send', 'r1', 'more'],
    ['resume', 'r1'],
    ['resume', '--all']
  ]
  for (const command of commands) {
    it(`${command.join(' ')} says so in one line, exits 2 and creates nothing`, async () => {
      const dir = tempDir()
      const db = path.join(dir, 'typo', 'av.db')
      const result = await runCli([...command, '--db', db])
      expect(result.code).toBe(2)
      expect(result.stderr).toBe(`agentvisor: no store at ${db}: nothing has run with it yet (check --db, or $AGENTVISOR_DB)\n`)
      expect(existsSync(path.join(dir, 'typo'))).toBe(false)
    })
  }
})

describe('resume of a run that has ended', () => {
  it('says it has ended, drives nothing and exits with its status code', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, { goal: 'Say hi', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [{ text: 'hi' }] }] })
    const { runId } = lastJson<{ runId: string }>(await runCli(['run', task, '--json', '--db', db]))
    const before = lastJson<{ transitions: unknown[] }>(await runCli(['show', runId, '--json', '--db', db])).transitions.length

    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code).toBe(0)
    expect(resumed.stderr.split('\n')[0]).toBe(
      `agentvisor: run ${runId} has ended (succeeded): there is nothing to resume (agentvisor send ${runId} TEXT continues it with a new turn)`
    )
    expect(resumed.stderr).not.toContain('resuming')
    expect(lastJson(resumed)).toMatchObject({ runId, status: 'succeeded', steps: 1 })
    expect(lastJson<{ transitions: unknown[] }>(await runCli(['show', runId, '--json', '--db', db])).transitions).toHaveLength(before)
  })
})
