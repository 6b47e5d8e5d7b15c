import type { IncomingMessage, ServerResponse } from 'node:http'
import { StoreError } from '@agentvisor/store'
import { Data } from 'effect'
import type { ErrorBody } from './api-types.js'

/** A request the inspector refuses: answered as JSON `{error}` with `status`, never a crash. */
export class HttpError extends Data.TaggedError('HttpError')<{ readonly status: number; readonly message: string }> {}

/** The largest request body the inspector reads (an approval decision is a few dozen bytes). */
const MAX_BODY_BYTES = 64 * 1024

export const sendJson = (res: ServerResponse, status: number, body: unknown): void => {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff'
  })
  res.end(text)
}

/**
 * Reads a JSON request body. Only `application/json` is accepted: a browser cannot send that
 * type cross-origin without a CORS preflight, which the inspector never grants, so another web
 * page cannot post decisions to it.
 */
export const readJsonBody = async (req: IncomingMessage): Promise<unknown> => {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase()
  if (type !== 'application/json') throw new HttpError({ status: 415, message: 'the body must be JSON (content-type: application/json)' })
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > MAX_BODY_BYTES) throw new HttpError({ status: 413, message: `the body is larger than ${MAX_BODY_BYTES} bytes` })
    chunks.push(chunk as Buffer)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown
  } catch {
    throw new HttpError({ status: 400, message: 'the body is not valid JSON' })
  }
}

/**
 * Answers a request that failed: an HttpError as it says, a corrupt row as the store names it
 * (docs/durability.md, "Corrupt rows"), anything else as an internal error in one line. The
 * server goes on either way; a response already under way is ended as it is.
 */
export const sendError = (res: ServerResponse, error: unknown): void => {
  if (res.headersSent) {
    res.end()
    return
  }
  if (error instanceof HttpError) {
    if (error.status === 401) res.setHeader('www-authenticate', 'Bearer realm="agentvisor inspector"')
    sendJson(res, error.status, { error: error.message } satisfies ErrorBody)
    return
  }
  if (error instanceof StoreError && error.column !== undefined) {
    sendJson(res, 500, { error: error.message } satisfies ErrorBody)
    return
  }
  const message = error instanceof Error ? error.message.split('\n')[0] : String(error)
  sendJson(res, 500, { error: `internal error: ${message}` } satisfies ErrorBody)
}
