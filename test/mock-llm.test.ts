import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { SCRIPT_EXHAUSTED_TEXT } from '@agentvisor/core'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { loadScenarios, type MockLlm, type MockScenarios } from '../packages/cli/src/mock-llm/index.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

let dir: string

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'agentvisor-mock-llm-'))
})

afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

// Registered after the file's own teardown, so it runs first: every mock is closed (its record
// file flushed) before the folders go.
const startMock = mockLlmPerTest()
const serve = (scenarios: MockScenarios, recordFile?: string): Promise<MockLlm> => startMock.scenarios(scenarios, { recordFile })

const post = (mock: MockLlm, route: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${mock.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })

interface Completion {
  choices: Array<{
    message: { content: string | null; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }> }
    finish_reason: string
  }>
}

const completion = async (mock: MockLlm, model: string): Promise<Completion> =>
  (await post(mock, '/chat/completions', { model, messages: [] })).json() as Promise<Completion>

/** Parses an SSE body into its events (`event` name, if any, and raw `data`). */
const parseSse = (text: string): Array<{ event?: string; data: string }> =>
  text
    .split('\n\n')
    .filter((frame) => frame.trim() !== '')
    .map((frame) => {
      const lines = frame.split('\n')
      const event = lines.find((line) => line.startsWith('event: '))?.slice('event: '.length)
      const data = lines.find((line) => line.startsWith('data: '))!.slice('data: '.length)
      return event === undefined ? { data } : { event, data }
    })

const waitFor = async (condition: () => boolean, timeoutMs = 2000): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe('mock LLM server', () => {
  it('plays each model its own steps in order and unlisted models the "*" steps, each with its own counter', async () => {
    const mock = await serve({ models: { a: [{ text: 'a1' }, { text: 'a2' }], '*': [{ text: 'any1' }, { text: 'any2' }] } })

    const texts = []
    for (const model of ['a', 'x', 'a', 'y', 'x']) texts.push((await completion(mock, model)).choices[0]!.message.content)

    expect(texts).toEqual(['a1', 'any1', 'a2', 'any1', 'any2'])
  })

  it('answers plain "done" once a model has played all its steps', async () => {
    const mock = await serve({ models: { a: [{ text: 'only' }] } })
    await completion(mock, 'a')
    const reply = await completion(mock, 'a')
    expect(reply.choices[0]).toMatchObject({ message: { content: SCRIPT_EXHAUSTED_TEXT }, finish_reason: 'stop' })
    expect(SCRIPT_EXHAUSTED_TEXT).toBe('done')
  })

  it('streams an OpenAI tool call as an id-and-name delta followed by several argument pieces, then usage and [DONE]', async () => {
    const args = { path: 'out.txt', content: 'DONE and some more text to split' }
    const mock = await serve({ models: { a: [{ toolCalls: [{ name: 'write_file', arguments: args }], usage: { inputTokens: 3, outputTokens: 4 } }] } })

    const response = await post(mock, '/chat/completions', { model: 'a', messages: [], stream: true, stream_options: { include_usage: true } })
    const events = parseSse(await response.text())

    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/)
    expect(events.at(-1)).toEqual({ data: '[DONE]' })
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event.data))
    const deltas = chunks.flatMap((chunk) => chunk.choices.flatMap((choice: { delta: { tool_calls?: unknown[] } }) => choice.delta.tool_calls ?? []))
    expect(deltas[0]).toEqual({ index: 0, id: 'call_1_1', type: 'function', function: { name: 'write_file', arguments: '' } })
    const pieces = deltas.slice(1).map((delta) => delta.function.arguments)
    expect(pieces.length).toBeGreaterThan(1)
    expect(pieces.join('')).toBe(JSON.stringify(args))
    expect(chunks.some((chunk) => chunk.choices[0]?.finish_reason === 'tool_calls')).toBe(true)
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } })
  })

  it('streams Anthropic named events with the tool input in several input_json_delta pieces', async () => {
    const args = { path: 'out.txt', content: 'DONE and some more text to split' }
    const mock = await serve({ models: { c: [{ toolCalls: [{ name: 'write_file', arguments: args }] }] } })

    const events = parseSse(await (await post(mock, '/messages', { model: 'c', max_tokens: 10, messages: [], stream: true })).text())

    const names = events.map((event) => event.event)
    expect(names[0]).toBe('message_start')
    expect(names.slice(-2)).toEqual(['message_delta', 'message_stop'])
    const parsed = events.map((event) => JSON.parse(event.data))
    expect(parsed.find((event) => event.type === 'content_block_start').content_block).toEqual({
      type: 'tool_use',
      id: 'toolu_1_1',
      name: 'write_file',
      input: {}
    })
    const pieces = parsed.filter((event) => event.delta?.type === 'input_json_delta').map((event) => event.delta.partial_json)
    expect(pieces.length).toBeGreaterThan(1)
    expect(JSON.parse(pieces.join(''))).toEqual(args)
    expect(parsed.find((event) => event.type === 'message_delta').delta.stop_reason).toBe('tool_use')
  })

  it('answers a scripted error with the status, the provider-shaped body, Retry-After in whole seconds rounded up and retry-after-ms', async () => {
    const mock = await serve({ models: { a: [{ error: { status: 429, retryAfterMs: 1200, message: 'slow down' } }], c: [{ error: { status: 529 } }] } })

    const openai = await post(mock, '/chat/completions', { model: 'a', messages: [] })
    expect(openai.status).toBe(429)
    expect(openai.headers.get('retry-after')).toBe('2')
    expect(openai.headers.get('retry-after-ms')).toBe('1200')
    expect(await openai.json()).toEqual({ error: { message: 'slow down', type: 'requests', code: 'rate_limit_exceeded', param: null } })

    const anthropic = await post(mock, '/messages', { model: 'c', messages: [] })
    expect(anthropic.status).toBe(529)
    expect(anthropic.headers.get('retry-after')).toBeNull()
    expect(await anthropic.json()).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } })
  })

  it('drops the connection without any response for a plain disconnect step', async () => {
    const mock = await serve({ models: { a: [{ disconnect: true }] } })
    await expect(post(mock, '/chat/completions', { model: 'a', messages: [] })).rejects.toThrow()
    expect(mock.requests).toHaveLength(1)
  })

  it('cuts a streamed disconnect step after sending the first half of its text', async () => {
    const mock = await serve({ models: { a: [{ text: 'abcdefghij', disconnect: true }] } })
    const response = await post(mock, '/chat/completions', { model: 'a', messages: [], stream: true })
    expect(response.status).toBe(200)

    const reader = response.body!.getReader()
    let received = ''
    await expect(
      (async () => {
        for (;;) {
          const { value, done } = await reader.read()
          if (done) return
          received += new TextDecoder().decode(value)
        }
      })()
    ).rejects.toThrow()

    expect(received).toContain('"content":"abcde"')
    expect(received).not.toContain('fghij')
    expect(received).not.toContain('[DONE]')
  })

  it('stops waiting on a delayed step when the client goes away, and never answers it', async () => {
    const mock = await serve({ models: { a: [{ delayMs: 5000, text: 'late' }] } })
    const controller = new AbortController()
    const pending = fetch(`${mock.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'a', messages: [] }), signal: controller.signal })
    await waitFor(() => mock.requests.length === 1)

    controller.abort()

    await expect(pending).rejects.toThrow()
    await waitFor(() => mock.abandoned.length === 1)
    expect(mock.abandoned[0]).toMatchObject({ path: '/v1/chat/completions', model: 'a' })
  })

  it('records every request with its body but never a credential, in memory and as JSON lines in the record file', async () => {
    const recordFile = path.join(dir, 'requests.jsonl')
    const mock = await serve({ models: { '*': [] } }, recordFile)
    const secret = 'sk-test-RECORD-SECRET-42'

    await post(mock, '/chat/completions', { model: 'a', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${secret}` })
    await post(mock, '/messages', { model: 'c', max_tokens: 5, messages: [], stream: true }, { 'x-api-key': secret }).then((r) => r.text())
    await fetch(`${mock.url}/models`)
    await mock.close()

    expect(mock.requests.map(({ method, path, model, stream, hasAuthorization }) => ({ method, path, model, stream, hasAuthorization }))).toEqual([
      { method: 'POST', path: '/v1/chat/completions', model: 'a', stream: false, hasAuthorization: true },
      { method: 'POST', path: '/v1/messages', model: 'c', stream: true, hasAuthorization: true },
      { method: 'GET', path: '/v1/models', model: null, stream: false, hasAuthorization: false }
    ])
    expect(mock.requests[0]!.body).toEqual({ model: 'a', messages: [{ role: 'user', content: 'hi' }] })
    const lines = (await readFile(recordFile, 'utf8')).trim().split('\n')
    expect(lines.map((line) => JSON.parse(line))).toEqual(JSON.parse(JSON.stringify(mock.requests)))
    expect(await readFile(recordFile, 'utf8')).not.toContain(secret)
    expect(JSON.stringify(mock.requests)).not.toContain(secret)
  })

  it('lists the scripted model names on GET /v1/models', async () => {
    const mock = await serve({ models: { 'gpt-a': [], 'claude-b': [], '*': [] } })
    const list = (await (await fetch(`${mock.url}/models`)).json()) as { data: Array<{ id: string }> }
    expect(list.data.map((model) => model.id)).toEqual(['gpt-a', 'claude-b'])
  })

  it('answers an unknown route with 404 and a non-JSON body with 400', async () => {
    const mock = await serve({ models: {} })
    expect((await fetch(`${mock.url}/embeddings`, { method: 'POST', body: '{}' })).status).toBe(404)
    expect((await fetch(`${mock.url}/chat/completions`, { method: 'POST', body: 'not json' })).status).toBe(400)
  })
})

describe('loadScenarios', () => {
  it('reads YAML as well as JSON', async () => {
    const file = path.join(dir, 'scenarios.yaml')
    await writeFile(
      file,
      'models:\n  gpt-a:\n    - error: { status: 503, retryAfterMs: 0 }\n    - toolCalls:\n        - name: write_file\n          arguments: { path: a.txt, content: x }\n'
    )
    expect(await loadScenarios(file)).toEqual({
      models: { 'gpt-a': [{ error: { status: 503, retryAfterMs: 0 } }, { toolCalls: [{ name: 'write_file', arguments: { path: 'a.txt', content: 'x' } }] }] }
    })
  })

  it('rejects a bad step with one line naming the field', async () => {
    const file = path.join(dir, 'scenarios.json')
    await writeFile(file, JSON.stringify({ models: { 'gpt-a': [{ text: 'ok' }, { error: { status: 999 } }] } }))
    const error = await loadScenarios(file).then(
      () => undefined,
      (e: unknown) => e as Error
    )
    expect(error?.message).toMatch(/models\.gpt-a\.1\.error\.status: /)
    expect(error?.message).not.toContain('\n')
  })

  it('rejects an unknown field by name', async () => {
    const file = path.join(dir, 'scenarios.json')
    await writeFile(file, JSON.stringify({ models: { a: [{ dealyMs: 10 }] } }))
    await expect(loadScenarios(file)).rejects.toThrow('models.a.0.dealyMs: is not a known field')
  })

  it('rejects a file that is not JSON', async () => {
    const file = path.join(dir, 'scenarios.json')
    await writeFile(file, '{ "models": ')
    await expect(loadScenarios(file)).rejects.toThrow(/not valid JSON/)
  })
})

/** Runs `runMockLlmCommand` in a child process (it owns the process's signals and stdout). */
const spawnCommand = (scenarios: string) => {
  const script = `import { runMockLlmCommand } from './packages/cli/src/mock-llm/index.ts'
process.exitCode = await runMockLlmCommand({ scenarios: ${JSON.stringify(scenarios)}, port: 0 })`
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (data: Buffer) => (stdout += data.toString()))
  child.stderr.on('data', (data: Buffer) => (stderr += data.toString()))
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return { child, exit, output: () => ({ stdout, stderr }) }
}

describe('runMockLlmCommand', () => {
  it('prints one listening line, serves the scenarios, and exits 0 on SIGTERM', async () => {
    const file = path.join(dir, 'scenarios.json')
    await writeFile(file, JSON.stringify({ models: { '*': [{ text: 'from the command' }] } }))
    const run = spawnCommand(file)
    try {
      await waitFor(() => run.output().stdout.includes('\n'), 60_000)
      const { stdout } = run.output()
      expect(stdout).toMatch(/^mock-llm listening on http:\/\/127\.0\.0\.1:\d+\/v1\n$/)
      const url = stdout.trim().slice('mock-llm listening on '.length)
      const reply = (await (
        await fetch(`${url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'x', messages: [] }) })
      ).json()) as Completion
      expect(reply.choices[0]!.message.content).toBe('from the command')

      run.child.kill('SIGTERM')
      expect(await run.exit).toBe(0)
      expect(
        run
          .output()
          .stdout.split('\n')
          .filter((line) => line !== '')
      ).toHaveLength(1)
    } finally {
      run.child.kill('SIGKILL')
    }
  })

  it('exits 2 with one agentvisor line on stderr for a bad scenarios file', async () => {
    const file = path.join(dir, 'scenarios.json')
    await writeFile(file, JSON.stringify({ models: { a: [{ delayMs: -1 }] } }))
    const run = spawnCommand(file)

    expect(await run.exit).toBe(2)
    const { stdout, stderr } = run.output()
    expect(stdout).toBe('')
    expect(stderr).toMatch(/^agentvisor: .*models\.a\.0\.delayMs: .+\n$/)
  })
})
