import { appendFile } from 'node:fs/promises'
import type { IncomingMessage } from 'node:http'
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

/** A request as it arrived: its record, and its body as the routes read it. */
export interface ArrivedRequest {
  readonly entry: RecordedRequest
  /** The body's fields when it is a JSON object; none otherwise. */
  readonly fields: Record<string, unknown>
  /** The body is there but is not JSON. */
  readonly badJson: boolean
}

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** The record of a request whose body (`raw`) was read in full. */
export const arrivedRequest = (req: IncomingMessage, raw: string): ArrivedRequest => {
  const path = (req.url ?? '/').split('?')[0]!
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
  return { entry, fields, badJson }
}

/** Every request the mock saw, in arrival order, kept in memory and appended to the record file. */
export interface RequestLog {
  readonly requests: ReadonlyArray<RecordedRequest>
  /** Requests whose client went away while a scripted `delayMs` was pending (aborted calls). */
  readonly abandoned: ReadonlyArray<RecordedRequest>
  readonly record: (entry: RecordedRequest) => void
  readonly abandon: (entry: RecordedRequest) => void
  /** Resolves once every line is in the record file. */
  readonly flushed: () => Promise<void>
}

/** A log appending each request as one JSON line to `recordFile`, when there is one. */
export const makeRequestLog = (recordFile: string | undefined): RequestLog => {
  const requests: RecordedRequest[] = []
  const abandoned: RecordedRequest[] = []
  // Appends are chained so the file keeps arrival order, and `flushed` can wait for the last one.
  let recording: Promise<void> = Promise.resolve()
  return {
    requests,
    abandoned,
    record: (entry) => {
      requests.push(entry)
      if (recordFile === undefined) return
      recording = recording
        .then(() => appendFile(recordFile, `${JSON.stringify(entry)}\n`))
        .catch((error: unknown) => {
          process.stderr.write(`mock-llm: ${terminalSafe(`cannot append to ${recordFile}: ${error instanceof Error ? error.message : String(error)}`)}\n`)
        })
    },
    abandon: (entry) => {
      abandoned.push(entry)
    },
    flushed: () => recording
  }
}
