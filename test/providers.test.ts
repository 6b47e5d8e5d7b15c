import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import * as net from 'node:net'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import {
  makeAnthropicProvider,
  makeOpenAIProvider,
  makeProvider,
  parseRetryAfter,
  providerErrorFromConnection,
  type ChatMessage,
  type ChatRequest,
  type ProviderError,
  type ToolSpec
} from '@agentvisor/core'
import { Effect, Either, Fiber } from 'effect'
import { afterEach, describe, expect, it } from 'vitest'
import type { MockLlm, MockScenarios } from '../packages/cli/src/mock-llm/index.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const servers: Array<Server | net.Server> = []
const tempDirs: string[] = []

afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (server) =>
        new Promise<void>((resolve) => {
          if ('closeAllConnections' in server) server.closeAllConnections()
          server.close(() => resolve())
        })
    )
  )
  await Promise.all(tempDirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })))
})

// Registered after the file's own teardown, so it runs first: every mock is closed (its record
// file flushed) before the folders go.
const startMock = mockLlmPerTest()
const serve = (scenarios: MockScenarios, recordFile?: string): Promise<MockLlm> => startMock.scenarios(scenarios, { recordFile })

/** A one-off HTTP server for wire shapes the mock never produces (a bare Retry-After, a stream without finish). */
const serveRaw = async (handler: Parameters<typeof createServer>[1]): Promise<string> => {
  const server = createServer(handler)
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
}

const fail = async (effect: Effect.Effect<unknown, ProviderError>): Promise<ProviderError> => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}

const waitFor = async (condition: () => boolean, timeoutMs = 2000): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

const writeFile: ToolSpec = {
  name: 'write_file',
  description: 'Write a file in the workspace',
  parameters: { type: 'object', properties: { path: { type: 'string' }, content: { type: 'string' } }, required: ['path', 'content'] }
}
const hello: ChatRequest = { messages: [{ role: 'user', content: 'Write DONE into out.txt' }], tools: [writeFile] }

/** A conversation with everything an adapter has to translate: system, tool calls (one malformed), results. */
const conversation: ChatMessage[] = [
  { role: 'system', content: 'You are careful.' },
  { role: 'user', content: 'Write DONE into out.txt' },
  {
    role: 'assistant',
    content: 'On it.',
    toolCalls: [
      { id: 'call_1', name: 'write_file', arguments: '{"path":"out.txt","content":"DONE"}' },
      { id: 'call_2', name: 'read_file', arguments: '{"path":"out.txt"' }
    ]
  },
  { role: 'tool', toolCallId: 'call_1', name: 'write_file', content: 'wrote 4 bytes' },
  { role: 'tool', toolCallId: 'call_2', name: 'read_file', content: 'malformed arguments' },
  { role: 'user', content: 'Check it' }
]

const twoToolCalls = {
  toolCalls: [
    { name: 'write_file', arguments: { path: 'notes/out.txt', content: 'DONE, with a longer body to split' } },
    { name: 'read_file', arguments: { path: 'notes/out.txt' } }
  ]
}

describe('openai adapter', () => {
  it('returns plain tool calls with their ids and the raw argument text, and the usage', async () => {
    const mock = await serve({ models: { 'gpt-test': [{ ...twoToolCalls, text: 'Writing.', usage: { inputTokens: 12, outputTokens: 7 } }] } })
    const provider = makeOpenAIProvider({ name: 'primary', model: 'gpt-test', baseUrl: mock.url })

    const reply = await Effect.runPromise(provider.chat(hello))

    expect(reply).toEqual({
      text: 'Writing.',
      toolCalls: [
        { id: 'call_1_1', name: 'write_file', arguments: '{"path":"notes/out.txt","content":"DONE, with a longer body to split"}' },
        { id: 'call_1_2', name: 'read_file', arguments: '{"path":"notes/out.txt"}' }
      ],
      usage: { inputTokens: 12, outputTokens: 7 }
    })
    expect(mock.requests[0]).toMatchObject({ method: 'POST', path: '/v1/chat/completions', model: 'gpt-test', stream: false })
  })

  it('keeps malformed tool arguments exactly as the model sent them', async () => {
    const mock = await serve({ models: { m: [{ toolCalls: [{ name: 'write_file', arguments: '{"path": "a.txt", ' }] }] } })
    const reply = await Effect.runPromise(makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: mock.url }).chat(hello))
    expect(reply.toolCalls).toEqual([{ id: 'call_1_1', name: 'write_file', arguments: '{"path": "a.txt", ' }])
  })

  it('reassembles streamed tool calls split over several deltas into exactly the calls a plain reply gives', async () => {
    const step = { ...twoToolCalls, text: 'Writing the file now.', usage: { inputTokens: 30, outputTokens: 9 } }
    const mock = await serve({ models: { 'gpt-test': [step, step] } })
    const plain = await Effect.runPromise(makeOpenAIProvider({ name: 'p', model: 'gpt-test', baseUrl: mock.url }).chat(hello))
    const streamed = await Effect.runPromise(makeOpenAIProvider({ name: 'p', model: 'gpt-test', baseUrl: mock.url, stream: true }).chat(hello))

    expect(streamed.text).toBe('Writing the file now.')
    expect(streamed.toolCalls).toEqual([
      { id: 'call_2_1', name: 'write_file', arguments: '{"path":"notes/out.txt","content":"DONE, with a longer body to split"}' },
      { id: 'call_2_2', name: 'read_file', arguments: '{"path":"notes/out.txt"}' }
    ])
    expect(streamed.toolCalls.map((call) => [call.name, call.arguments])).toEqual(plain.toolCalls.map((call) => [call.name, call.arguments]))
    expect(streamed.usage).toEqual({ inputTokens: 30, outputTokens: 9 })
    expect(streamed.timeToFirstTokenMs).toBeGreaterThanOrEqual(0)
    expect(plain.timeToFirstTokenMs).toBeUndefined()
    expect(mock.requests[1]).toMatchObject({ stream: true, body: { stream: true, stream_options: { include_usage: true } } })
  })

  it('sends system, assistant tool calls and tool results in the chat-completions shape', async () => {
    const mock = await serve({ models: { m: [{ text: 'ok' }] } })
    await Effect.runPromise(makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: mock.url }).chat({ messages: conversation, tools: [writeFile] }))

    expect(mock.requests[0]!.body).toEqual({
      model: 'm',
      messages: [
        { role: 'system', content: 'You are careful.' },
        { role: 'user', content: 'Write DONE into out.txt' },
        {
          role: 'assistant',
          content: 'On it.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'write_file', arguments: '{"path":"out.txt","content":"DONE"}' } },
            { id: 'call_2', type: 'function', function: { name: 'read_file', arguments: '{"path":"out.txt"' } }
          ]
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'wrote 4 bytes' },
        { role: 'tool', tool_call_id: 'call_2', content: 'malformed arguments' },
        { role: 'user', content: 'Check it' }
      ],
      tools: [{ type: 'function', function: { name: 'write_file', description: writeFile.description, parameters: writeFile.parameters } }]
    })
  })

  it('sends no tools field when no tool is offered', async () => {
    const mock = await serve({ models: { m: [{ text: 'ok' }] } })
    await Effect.runPromise(makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: mock.url }).chat({ messages: hello.messages, tools: [] }))
    expect(mock.requests[0]!.body).not.toHaveProperty('tools')
  })

  it('reports a 401 as auth with its HTTP status, never echoing the key', async () => {
    const mock = await serve({ models: { m: [{ error: { status: 401, message: 'Incorrect API key provided: sk-test-SECRET-401' } }] } })
    const error = await fail(makeOpenAIProvider({ name: 'primary', model: 'm', baseUrl: mock.url, apiKey: 'sk-test-SECRET-401' }).chat(hello))
    expect(error).toMatchObject({ _tag: 'ProviderError', kind: 'auth', httpStatus: 401, provider: 'primary' })
    expect(error.isRetryable).toBe(false)
    expect(error.message).not.toContain('sk-test-SECRET-401')
  })

  it('reports 400 and 404 as request errors', async () => {
    const mock = await serve({ models: { m: [{ error: { status: 400, message: 'bad tool schema' } }, { error: { status: 404 } }] } })
    const provider = makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: mock.url })
    expect(await fail(provider.chat(hello))).toMatchObject({ kind: 'request', httpStatus: 400, message: '400 bad tool schema' })
    expect(await fail(provider.chat(hello))).toMatchObject({ kind: 'request', httpStatus: 404 })
  })

  it('reports a context-length overflow as a request error whatever status carried it', async () => {
    const overflow = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
    const mock = await serve({ models: { m: [{ error: { status: 400, message: overflow } }, { error: { status: 500, message: overflow } }] } })
    const provider = makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: mock.url })
    const first = await fail(provider.chat(hello))
    expect(first).toMatchObject({ kind: 'request', httpStatus: 400 })
    expect(first.message).toMatch(/^context length exceeded: /)
    expect(await fail(provider.chat(hello))).toMatchObject({ kind: 'request', httpStatus: 500 })
  })

  it('reports a 503 as transient and keeps the retry-after-ms delay', async () => {
    const mock = await serve({ models: { m: [{ error: { status: 503, retryAfterMs: 1500 } }] } })
    const error = await fail(makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: mock.url }).chat(hello))
    expect(error).toMatchObject({ kind: 'transient', httpStatus: 503, retryAfterMs: 1500 })
    expect(error.isRetryable).toBe(true)
  })

  it('reads a 429 Retry-After given in seconds only', async () => {
    const url = await serveRaw((_req, res) => {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '3' })
      res.end(JSON.stringify({ error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' } }))
    })
    const error = await fail(makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: url }).chat(hello))
    expect(error).toMatchObject({ kind: 'transient', httpStatus: 429, retryAfterMs: 3000 })
  })

  it('reads a Retry-After given as an HTTP date', async () => {
    const url = await serveRaw((_req, res) => {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': new Date(Date.now() + 10_000).toUTCString() })
      res.end(JSON.stringify({ error: { message: 'busy' } }))
    })
    const error = await fail(makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: url }).chat(hello))
    expect(error.retryAfterMs).toBeGreaterThan(8000)
    expect(error.retryAfterMs).toBeLessThanOrEqual(10_000)
  })

  it('reports a connection dropped without a response as transient and possibly delivered', async () => {
    const mock = await serve({ models: { m: [{ disconnect: true }] } })
    const error = await fail(makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: mock.url }).chat(hello))
    expect(error).toMatchObject({ kind: 'transient', possiblyDelivered: true })
    expect(error.httpStatus).toBeUndefined()
    expect(mock.requests).toHaveLength(1)
  })

  it('reports a refused connection as transient and not delivered', async () => {
    const probe = net.createServer()
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
    const port = (probe.address() as AddressInfo).port
    await new Promise<void>((resolve) => probe.close(() => resolve()))

    const error = await fail(makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: `http://127.0.0.1:${port}/v1` }).chat(hello))
    expect(error).toMatchObject({ kind: 'transient', possiblyDelivered: false })
    expect(error.message).toContain('ECONNREFUSED')
  })

  it('reports a stream cut midway as transient, possibly delivered, keeping the text received so far', async () => {
    const mock = await serve({ models: { m: [{ text: 'The quick brown fox jumps over the lazy dog', disconnect: true }] } })
    const error = await fail(makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: mock.url, stream: true }).chat(hello))
    // The mock sends the first half of the text (22 of 43 characters) before it cuts the socket.
    expect(error).toMatchObject({ kind: 'transient', possiblyDelivered: true, partialText: 'The quick brown fox ju' })
  })

  it('reports a stream that ends without a finish reason as a cut stream', async () => {
    const url = await serveRaw((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      const chunk = (delta: unknown) =>
        `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`
      res.end(`${chunk({ role: 'assistant', content: '' })}${chunk({ content: 'Hel' })}data: [DONE]\n\n`)
    })
    const error = await fail(makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: url, stream: true }).chat(hello))
    expect(error).toMatchObject({ kind: 'transient', possiblyDelivered: true, partialText: 'Hel' })
  })

  it('aborts the HTTP request when the Effect times out during a slow answer', async () => {
    const mock = await serve({ models: { slow: [{ delayMs: 5000, text: 'too late' }] } })
    const provider = makeOpenAIProvider({ name: 'p', model: 'slow', baseUrl: mock.url })
    const started = Date.now()

    const result = await Effect.runPromise(Effect.either(provider.chat(hello).pipe(Effect.timeout('150 millis'))))

    expect(Either.isLeft(result) && result.left._tag).toBe('TimeoutException')
    expect(Date.now() - started).toBeLessThan(2000)
    await waitFor(() => mock.abandoned.length === 1)
  })
})

describe('anthropic adapter', () => {
  it('returns tool_use blocks as tool calls with their input as JSON text', async () => {
    const mock = await serve({ models: { claude: [{ ...twoToolCalls, text: 'Writing.', usage: { inputTokens: 21, outputTokens: 5 } }] } })
    const reply = await Effect.runPromise(makeAnthropicProvider({ name: 'secondary', model: 'claude', baseUrl: mock.url }).chat(hello))

    expect(reply).toEqual({
      text: 'Writing.',
      toolCalls: [
        { id: 'toolu_1_1', name: 'write_file', arguments: JSON.stringify({ path: 'notes/out.txt', content: 'DONE, with a longer body to split' }) },
        { id: 'toolu_1_2', name: 'read_file', arguments: JSON.stringify({ path: 'notes/out.txt' }) }
      ],
      usage: { inputTokens: 21, outputTokens: 5 }
    })
    expect(mock.requests[0]).toMatchObject({ method: 'POST', path: '/v1/messages', model: 'claude', stream: false })
  })

  it('sends system as the system parameter, tool calls as tool_use and consecutive results as one user turn', async () => {
    const mock = await serve({ models: { claude: [{ text: 'ok' }] } })
    await Effect.runPromise(
      makeAnthropicProvider({ name: 'p', model: 'claude', baseUrl: mock.url, maxTokens: 1000 }).chat({ messages: conversation, tools: [writeFile] })
    )

    const body = mock.requests[0]!.body as Record<string, unknown>
    expect(body['system']).toBe('You are careful.')
    expect(body['max_tokens']).toBe(1000)
    expect(body['messages']).toEqual([
      { role: 'user', content: 'Write DONE into out.txt' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'On it.' },
          { type: 'tool_use', id: 'call_1', name: 'write_file', input: { path: 'out.txt', content: 'DONE' } },
          // Malformed arguments cannot be an object: they are replayed as {}.
          { type: 'tool_use', id: 'call_2', name: 'read_file', input: {} }
        ]
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_1', content: 'wrote 4 bytes' },
          { type: 'tool_result', tool_use_id: 'call_2', content: 'malformed arguments' }
        ]
      },
      { role: 'user', content: 'Check it' }
    ])
    expect(body['tools']).toEqual([{ name: 'write_file', description: writeFile.description, input_schema: writeFile.parameters }])
  })

  it('defaults max_tokens to 4096', async () => {
    const mock = await serve({ models: { claude: [{ text: 'ok' }] } })
    await Effect.runPromise(makeAnthropicProvider({ name: 'p', model: 'claude', baseUrl: mock.url }).chat(hello))
    expect(mock.requests[0]!.body).toMatchObject({ max_tokens: 4096 })
  })

  it('reassembles streamed input_json_delta pieces into the same tool calls as a plain reply', async () => {
    const step = { ...twoToolCalls, text: 'Writing the file now.', usage: { inputTokens: 40, outputTokens: 11 } }
    const mock = await serve({ models: { claude: [step] } })
    const reply = await Effect.runPromise(makeAnthropicProvider({ name: 'p', model: 'claude', baseUrl: mock.url, stream: true }).chat(hello))

    expect(reply.text).toBe('Writing the file now.')
    expect(reply.toolCalls).toEqual([
      { id: 'toolu_1_1', name: 'write_file', arguments: JSON.stringify({ path: 'notes/out.txt', content: 'DONE, with a longer body to split' }) },
      { id: 'toolu_1_2', name: 'read_file', arguments: JSON.stringify({ path: 'notes/out.txt' }) }
    ])
    expect(reply.usage).toEqual({ inputTokens: 40, outputTokens: 11 })
    expect(reply.timeToFirstTokenMs).toBeGreaterThanOrEqual(0)
    expect(mock.requests[0]).toMatchObject({ stream: true })
  })

  it('reports 529 overloaded as transient with its Retry-After', async () => {
    const mock = await serve({ models: { claude: [{ error: { status: 529, retryAfterMs: 2000, message: 'Overloaded' } }] } })
    const error = await fail(makeAnthropicProvider({ name: 'p', model: 'claude', baseUrl: mock.url }).chat(hello))
    expect(error).toMatchObject({ kind: 'transient', httpStatus: 529, retryAfterMs: 2000, message: '529 Overloaded' })
  })

  it('reports a 401 as auth and a too-long prompt as a request error', async () => {
    const mock = await serve({
      models: {
        claude: [
          { error: { status: 401, message: 'invalid x-api-key' } },
          { error: { status: 400, message: 'prompt is too long: 210000 tokens > 200000 maximum' } }
        ]
      }
    })
    const provider = makeAnthropicProvider({ name: 'p', model: 'claude', baseUrl: mock.url })
    expect(await fail(provider.chat(hello))).toMatchObject({ kind: 'auth', httpStatus: 401 })
    const overflow = await fail(provider.chat(hello))
    expect(overflow).toMatchObject({ kind: 'request', httpStatus: 400 })
    expect(overflow.message).toMatch(/^context length exceeded/)
  })

  it('reports a dropped connection as transient and possibly delivered', async () => {
    const mock = await serve({ models: { claude: [{ disconnect: true }] } })
    const error = await fail(makeAnthropicProvider({ name: 'p', model: 'claude', baseUrl: mock.url }).chat(hello))
    expect(error).toMatchObject({ kind: 'transient', possiblyDelivered: true })
  })

  it('reports a stream cut midway as transient, keeping the text received so far', async () => {
    const mock = await serve({ models: { claude: [{ text: 'The quick brown fox jumps over the lazy dog', disconnect: true }] } })
    const error = await fail(makeAnthropicProvider({ name: 'p', model: 'claude', baseUrl: mock.url, stream: true }).chat(hello))
    // The mock sends the first half of the text (22 of 43 characters) before it cuts the socket.
    expect(error).toMatchObject({ kind: 'transient', possiblyDelivered: true, partialText: 'The quick brown fox ju' })
  })

  it('aborts the HTTP request when its fiber is interrupted during a slow answer', async () => {
    const mock = await serve({ models: { claude: [{ delayMs: 5000, text: 'too late' }] } })
    const fiber = Effect.runFork(makeAnthropicProvider({ name: 'p', model: 'claude', baseUrl: mock.url }).chat(hello))
    await waitFor(() => mock.requests.length === 1)

    await Effect.runPromise(Fiber.interrupt(fiber))

    await waitFor(() => mock.abandoned.length === 1)
  })
})

describe('makeProvider', () => {
  it('fails a dispatch as auth naming the unset variable, without sending anything', async () => {
    const mock = await serve({ models: { m: [{ text: 'ok' }] } })
    const provider = makeProvider({ name: 'primary', kind: 'openai', model: 'm', baseUrl: mock.url, apiKeyEnv: 'AGENTVISOR_TEST_MISSING_KEY' }, {})

    const error = await fail(provider.chat(hello))

    expect(error).toMatchObject({ kind: 'auth', provider: 'primary', message: 'environment variable AGENTVISOR_TEST_MISSING_KEY is not set' })
    expect(mock.requests).toHaveLength(0)
  })

  it('treats an empty key variable as unset', async () => {
    const provider = makeProvider({ name: 'secondary', kind: 'anthropic', model: 'claude', apiKeyEnv: 'AGENTVISOR_TEST_EMPTY' }, { AGENTVISOR_TEST_EMPTY: '' })
    expect(await fail(provider.chat(hello))).toMatchObject({ kind: 'auth', message: 'environment variable AGENTVISOR_TEST_EMPTY is not set' })
  })

  it('reads the key at dispatch time, not when the provider is built', async () => {
    const mock = await serve({ models: { m: [{ text: 'ok' }] } })
    const env: NodeJS.ProcessEnv = {}
    const provider = makeProvider({ name: 'primary', kind: 'openai', model: 'm', baseUrl: mock.url, apiKeyEnv: 'AGENTVISOR_TEST_LATE_KEY' }, env)
    expect(await fail(provider.chat(hello))).toMatchObject({ kind: 'auth' })

    env['AGENTVISOR_TEST_LATE_KEY'] = 'sk-test-late'
    const reply = await Effect.runPromise(provider.chat(hello))

    expect(reply.text).toBe('ok')
    expect(mock.requests).toHaveLength(1)
    expect(mock.requests[0]!.hasAuthorization).toBe(true)
  })

  it('plays a scripted provider entry inline', async () => {
    const provider = makeProvider({ name: 'demo', kind: 'scripted', steps: [{ text: 'first' }, { error: { status: 503 } }] }, {})
    expect(provider.kind).toBe('scripted')
    expect((await Effect.runPromise(provider.chat(hello))).text).toBe('first')
    expect(await fail(provider.chat(hello))).toMatchObject({ kind: 'transient', httpStatus: 503 })
  })

  it.each([
    ['openai', 'm'],
    ['anthropic', 'claude']
  ] as const)('sends the %s key on the wire but never records it', async (kind, model) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'agentvisor-keys-'))
    tempDirs.push(dir)
    const recordFile = path.join(dir, 'requests.jsonl')
    const mock = await serve({ models: { [model]: [{ text: 'ok' }] } }, recordFile)
    // A byte-capturing TCP relay in front of the mock shows what actually went over the socket.
    let wire = ''
    const relay = net.createServer((client) => {
      const upstream = net.connect(mock.port, '127.0.0.1')
      client.on('data', (data: Buffer) => {
        wire += data.toString('latin1')
      })
      client.pipe(upstream).pipe(client)
      client.on('error', () => upstream.destroy())
      upstream.on('error', () => client.destroy())
    })
    servers.push(relay)
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve))
    const secret = `sk-test-${kind}-SECRET-0123456789`
    const provider = makeProvider(
      { name: 'primary', kind, model, baseUrl: `http://127.0.0.1:${(relay.address() as AddressInfo).port}/v1`, apiKeyEnv: 'AGENTVISOR_TEST_KEY' },
      { AGENTVISOR_TEST_KEY: secret }
    )

    await Effect.runPromise(provider.chat({ messages: conversation, tools: [writeFile] }))
    await mock.close()

    expect(wire).toMatch(new RegExp(`\\r\\n(authorization: Bearer|x-api-key:) ?${secret}\\r\\n`, 'i'))
    expect(mock.requests).toHaveLength(1)
    expect(mock.requests[0]!.hasAuthorization).toBe(true)
    expect(JSON.stringify(mock.requests)).not.toContain(secret)
    const recorded = await readFile(recordFile, 'utf8')
    expect(recorded.trim().split('\n')).toHaveLength(1)
    expect(recorded).not.toContain(secret)
  })
})

describe('parseRetryAfter', () => {
  const now = Date.parse('2025-01-01T00:00:00Z')

  it('reads delta-seconds as milliseconds', () => {
    expect(parseRetryAfter('3', undefined, now)).toBe(3000)
    expect(parseRetryAfter('0.5', undefined, now)).toBe(500)
  })

  it('reads an HTTP date as the time left until it', () => {
    expect(parseRetryAfter('Wed, 01 Jan 2025 00:00:07 GMT', undefined, now)).toBe(7000)
  })

  it('never returns a negative wait for a date in the past', () => {
    expect(parseRetryAfter('Tue, 31 Dec 2024 23:59:00 GMT', undefined, now)).toBe(0)
  })

  it('prefers the retry-after-ms header when both are sent', () => {
    expect(parseRetryAfter('2', '1500', now)).toBe(1500)
  })

  it('falls back to Retry-After when retry-after-ms is not a number', () => {
    expect(parseRetryAfter('2', 'soon', now)).toBe(2000)
  })

  it('returns undefined for absent or unreadable headers', () => {
    expect(parseRetryAfter(undefined, undefined, now)).toBeUndefined()
    expect(parseRetryAfter('', null, now)).toBeUndefined()
    expect(parseRetryAfter('whenever', undefined, now)).toBeUndefined()
    expect(parseRetryAfter('-5', undefined, now)).toBeUndefined()
  })
})

describe('providerErrorFromConnection', () => {
  it('marks a failure before connecting as not delivered and a reset after connecting as possibly delivered', () => {
    const refused = new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) })
    const reset = new TypeError('fetch failed', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) })
    expect(providerErrorFromConnection('p', refused)).toMatchObject({ kind: 'transient', possiblyDelivered: false })
    expect(providerErrorFromConnection('p', reset)).toMatchObject({ kind: 'transient', possiblyDelivered: true })
  })
})
