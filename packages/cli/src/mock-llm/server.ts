import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { ScriptedStep } from '@agentvisor/core'
import { anthropicErrorBody, anthropicMessage, anthropicStreamEvents } from './anthropic-wire.js'
import { answerOf, type MockAnswer } from './answer.js'
import { openAiCompletion, openAiErrorBody, openAiStreamEvents } from './openai-wire.js'
import { ANY_MODEL, makeScenarioPlayer, type MockScenarios } from './scenarios.js'
import { writeSseEvents, writeSseHead, type SseEvent } from './sse.js'
import { arrivedRequest, isObject, makeRequestLog, type RecordedRequest } from './request-log.js'

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
  const log = makeRequestLog(options.recordFile)
  const delays = cancellableDelays()
  let sequence = 0

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const { entry, fields, badJson } = arrivedRequest(req, await readBody(req))
    log.record(entry)
    const route = routeOf(entry.method, entry.path)
    if (route === 'models') {
      const ids = Object.keys(options.scenarios.models).filter((id) => id !== ANY_MODEL)
      return sendJson(res, 200, { object: 'list', data: ids.map((id) => ({ id, object: 'model', created: 0, owned_by: 'agentvisor-mock' })) })
    }
    if (route === undefined) return sendError(res, 'openai', 404, `no route for ${req.method} ${entry.path}`)
    const body = entry.body
    if (badJson || !isObject(body)) return sendError(res, route, 400, 'request body is not a JSON object')

    const turn = Array.isArray(body['messages']) ? body['messages'].filter((m: unknown) => isObject(m) && m['role'] === 'assistant').length : 0
    const { step, number } = player.next(entry.model ?? '', turn, firstUserText(body))
    if (step?.delayMs !== undefined && step.delayMs > 0) {
      const answered = await delays.wait(step.delayMs, res)
      if (!answered) {
        log.abandon(entry)
        if (!res.destroyed) res.destroy()
        return
      }
    }
    sequence += 1
    await play(req, res, route, entry, step, number, sequence, fields)
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
    requests: log.requests,
    abandoned: log.abandoned,
    close: () => {
      closing ??= (async () => {
        delays.cancelAll()
        const closed = new Promise<void>((resolve) => server.close(() => resolve()))
        // Keep-alive sockets would hold close() open until the client's idle timeout.
        server.closeAllConnections()
        await closed
        await log.flushed()
      })()
      return closing
    }
  }
}

/** What a request asks for, by its method and path: the model list, or a chat in one of the two dialects. */
const routeOf = (method: string, path: string): 'models' | Dialect | undefined => {
  if (method === 'GET' && path === '/v1/models') return 'models'
  if (method === 'POST' && path === '/v1/chat/completions') return 'openai'
  if (method === 'POST' && path === '/v1/messages') return 'anthropic'
  return undefined
}

/** Scripted waits (`delayMs`) that end early when their client goes away, or all at once when the server closes. */
interface CancellableDelays {
  /** Waits `ms`; resolves false if the client went away (or the server closed) first. */
  readonly wait: (ms: number, res: ServerResponse) => Promise<boolean>
  readonly cancelAll: () => void
}

const cancellableDelays = (): CancellableDelays => {
  const pending = new Set<() => void>()
  return {
    wait: (ms, res) =>
      new Promise((resolve) => {
        const finish = (answered: boolean) => {
          clearTimeout(timer)
          res.off('close', onClose)
          pending.delete(cancel)
          resolve(answered)
        }
        const onClose = () => finish(false)
        const cancel = () => finish(false)
        const timer = setTimeout(() => finish(true), ms)
        res.on('close', onClose)
        pending.add(cancel)
      }),
    cancelAll: () => {
      for (const cancel of [...pending]) cancel()
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
