import type { IncomingMessage, ServerResponse } from 'node:http'
import { Data } from 'effect'

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
