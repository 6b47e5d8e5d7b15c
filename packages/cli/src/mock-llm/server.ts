import { appendFile } from 'node:fs/promises'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { ScriptedStep } from '@agentvisor/core'
import { anthropicErrorBody, anthropicMessage, anthropicStreamEvents } from './anthropic-wire.js'
import { answerOf, type MockAnswer } from './answer.js'
import { openAiCompletion, openAiErrorBody, openAiStreamEvents } from './openai-wire.js'
import { ANY_MODEL, makeScenarioPlayer, type MockScenarios } from './scenarios.js'
import { writeSseEvents, writeSseHead, type SseEvent } from './sse.js'
import { terminalSafe } from '../terminal-text.js'

/**
 * One request as the mock saw it. Credentials are never kept: only whether an `Authorization`
 * or `x-api-key` header was present.
 */
export interface RecordedRequest {
  /** ISO timestamp of arrival. */
  readonly at: string
  readonly method: string
  readonly path: string
  readonly model: string | null
  readonly stream: boolean
  /** The parsed JSON body (null for a GET or a body that is not JSON). */
  readonly body: unknown
  readonly hasAuthorization: boolean
}

export interface MockLlmOptions {
  readonly scenarios: MockScenarios
  /** 0 (the default) picks a free port. */
  readonly port?: number | undefined
  /** Defaults to 127.0.0.1: the mock is for local demos and tests, never exposed. */
  readonly host?: string | undefined
  /** Appends every request as one JSON line. */
  readonly recordFile?: string | undefined
}

/** A running mock LLM server. */
export interface MockLlm {
  /** Base URL for SDKs, ending in `/v1`: `http://127.0.0.1:PORT/v1`. */
  readonly url: string
  readonly port: number
  /** Every request, in arrival order. */
  readonly requests: ReadonlyArray<RecordedRequest>
  /** Requests whose client went away while a scripted `delayMs` was pending (aborted calls). */
  readonly abandoned: ReadonlyArray<RecordedRequest>
  /** Stops listening, drops open connections and flushes the record file. */
  close(): Promise<void>
}

const MAX_BODY_BYTES = 16 * 1024 * 1024

type Dialect = 'openai' | 'anthropic'

/**
 * Starts a scripted LLM server speaking the OpenAI chat-completions and Anthropic Messages wire
 * formats (plain JSON and SSE streams) on node:http. Each request plays the next `ScriptedStep`
 * of its model: an answer, an HTTP error with Retry-After, a dropped connection, after `delayMs`.
 *
 * @example
 * const mock = await startMockLlm({ scenarios: { models: { '*': [{ text: 'hi' }] } } })
 * const provider = makeOpenAIProvider({ name: 'p', model: 'm', baseUrl: mock.url })
 */
export const startMockLlm = async (options: MockLlmOptions): Promise<MockLlm> => {
  const player = makeScenarioPlayer(options.scenarios)
  const requests: RecordedRequest[] = []
  const abandoned: RecordedRequest[] = []
  const pendingDelays = new Set<() => void>()
  // Appends are chained so the file keeps arrival order, and close() can wait for the last one.
  let recording: Promise<void> = Promise.resolve()
  let sequence = 0

  const record = (entry: RecordedRequest): void => {
    requests.push(entry)
    if (options.recordFile !== undefined) {
      const file = options.recordFile
      recording = recording
        .then(() => appendFile(file, `${JSON.stringify(entry)}\n`))
        .catch((error: unknown) => {
          process.stderr.write(`mock-llm: ${terminalSafe(`cannot append to ${file}: ${error instanceof Error ? error.message : String(error)}`)}\n`)
        })
    }
  }

  /** Waits `ms`; resolves false if the client went away (or the server closed) first. */
  const delay = (ms: number, res: ServerResponse): Promise<boolean> =>
    new Promise((resolve) => {
      const finish = (answered: boolean) => {
        clearTimeout(timer)
        res.off('close', onClose)
        pendingDelays.delete(cancel)
        resolve(answered)
      }
      const onClose = () => finish(false)
      const cancel = () => finish(false)
      const timer = setTimeout(() => finish(true), ms)
      res.on('close', onClose)
      pendingDelays.add(cancel)
    })

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0]!
    const raw = await readBody(req)
    let body: unknown = null
    let badJson = false
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw)
      } catch {
        badJson = true
      }
    }
    const fields = isObject(body) ? body : {}
    const entry: RecordedRequest = {
      at: new Date().toISOString(),
      method: req.method ?? 'GET',
      path,
      model: typeof fields['model'] === 'string' ? fields['model'] : null,
      stream: fields['stream'] === true,
      body,
      hasAuthorization: req.headers.authorization !== undefined || req.headers['x-api-key'] !== undefined
    }
    record(entry)

    if (req.method === 'GET' && path === '/v1/models') {
      const ids = Object.keys(options.scenarios.models).filter((id) => id !== ANY_MODEL)
      return sendJson(res, 200, { object: 'list', data: ids.map((id) => ({ id, object: 'model', created: 0, owned_by: 'agentvisor-mock' })) })
    }
    const dialect: Dialect | undefined =
      req.method === 'POST' && path === '/v1/chat/completions' ? 'openai' : req.method === 'POST' && path === '/v1/messages' ? 'anthropic' : undefined
    if (dialect === undefined) return sendError(res, 'openai', 404, `no route for ${req.method} ${path}`)
    if (badJson || !isObject(body)) return sendError(res, dialect, 400, 'request body is not a JSON object')

    const turn = Array.isArray(body['messages']) ? body['messages'].filter((m: unknown) => isObject(m) && m['role'] === 'assistant').length : 0
    const { step, number } = player.next(entry.model ?? '', turn, firstUserText(body))
    if (step?.delayMs !== undefined && step.delayMs > 0) {
      const answered = await delay(step.delayMs, res)
      if (!answered) {
        abandoned.push(entry)
        if (!res.destroyed) res.destroy()
        return
      }
    }
    sequence += 1
    await play(req, res, dialect, entry, step, number, sequence, fields)
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: `mock-llm: ${error instanceof Error ? error.message : String(error)}` } })
      else res.destroy()
    })
  })

  const host = options.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const port = (server.address() as AddressInfo).port
  const urlHost = host.includes(':') ? `[${host}]` : host

  let closing: Promise<void> | undefined
  return {
    url: `http://${urlHost}:${port}/v1`,
    port,
    requests,
    abandoned,
    close: () => {
      closing ??= (async () => {
        for (const cancel of [...pendingDelays]) cancel()
        const closed = new Promise<void>((resolve) => server.close(() => resolve()))
        // Keep-alive sockets would hold close() open until the client's idle timeout.
        server.closeAllConnections()
        await closed
        await recording
      })()
      return closing
    }
  }
}

const play = async (
  req: IncomingMessage,
  res: ServerResponse,
  dialect: Dialect,
  entry: RecordedRequest,
  step: ScriptedStep | undefined,
  number: number,
  sequence: number,
  body: Record<string, unknown>
): Promise<void> => {
  if (step?.error !== undefined) {
    const { status, retryAfterMs, message } = step.error
    const headers: Record<string, string> = {}
    if (retryAfterMs !== undefined) {
      // Retry-After only has whole seconds; retry-after-ms keeps the scripted precision.
      headers['retry-after'] = String(Math.ceil(retryAfterMs / 1000))
      headers['retry-after-ms'] = String(retryAfterMs)
    }
    const text = message ?? `mock-llm scripted HTTP ${status}`
    const credential = req.headers.authorization ?? req.headers['x-api-key']
    const echo =
      step.error.echoAuthorization === true
        ? ` (received ${req.headers.authorization !== undefined ? 'Authorization' : 'x-api-key'}: ${String(credential ?? '')})`
        : ''
    return sendError(res, dialect, status, `${text}${echo}`, headers)
  }
  const model = entry.model ?? 'mock'
  const answer: MockAnswer = answerOf(step, number, dialect === 'openai' ? 'call' : 'toolu', body)
  const cut = step?.disconnect === true

  if (cut && !entry.stream) {
    // The request arrived and was "worked on", but no response ever comes: a reset after sending.
    req.socket.destroy()
    return
  }
  if (!entry.stream) {
    return sendJson(
      res,
      200,
      dialect === 'openai' ? openAiCompletion(answer, model, `chatcmpl-mock-${sequence}`) : anthropicMessage(answer, model, `msg_mock_${sequence}`)
    )
  }

  const includeUsage = isObject(body['stream_options']) && body['stream_options']['include_usage'] === true
  const events: SseEvent[] =
    dialect === 'openai'
      ? openAiStreamEvents(answer, model, `chatcmpl-mock-${sequence}`, { includeUsage, cut })
      : anthropicStreamEvents(answer, model, `msg_mock_${sequence}`, { cut })
  writeSseHead(res)
  await writeSseEvents(res, events, step?.chunkDelayMs ?? 0)
  if (!cut) {
    res.end()
    return
  }
  // Give the client time to read the first part: a stream that errors discards chunks it has
  // queued but not yet read, and the point of the cut is the partial text it leaves behind.
  await new Promise((resolve) => setTimeout(resolve, 50))
  res.socket?.destroy()
}

/** The text of a request's first user message (OpenAI or Anthropic shape), for goal scripts. */
const firstUserText = (body: Record<string, unknown>): string => {
  const messages = Array.isArray(body['messages']) ? body['messages'] : []
  const first = messages.find((m: unknown) => isObject(m) && m['role'] === 'user')
  if (!isObject(first)) return ''
  const content = first['content']
  if (typeof content === 'string') return content
  return Array.isArray(content) ? content.map((part: unknown) => (isObject(part) && typeof part['text'] === 'string' ? part['text'] : '')).join('') : ''
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        reject(new Error('request body too large'))
        req.destroy()
        return
      }
      chunks.push(chunk)
    })
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })

const sendJson = (res: ServerResponse, status: number, payload: unknown, headers: Record<string, string> = {}): void => {
  const text = JSON.stringify(payload)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
  res.end(text)
}

const sendError = (res: ServerResponse, dialect: Dialect, status: number, message: string, headers: Record<string, string> = {}): void =>
  sendJson(res, status, dialect === 'openai' ? openAiErrorBody(status, message) : anthropicErrorBody(status, message), headers)
