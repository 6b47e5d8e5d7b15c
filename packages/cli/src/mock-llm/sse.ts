import type { ServerResponse } from 'node:http'

/** One server-sent event; `event` is the named type Anthropic uses, absent for OpenAI's bare `data:` lines. */
export interface SseEvent {
  readonly event?: string | undefined
  readonly data: string
}

/** A JSON payload as an event. */
export const jsonEvent = (data: unknown, event?: string): SseEvent => ({ event, data: JSON.stringify(data) })

/** The wire form of one event, blank line included. */
export const sseFrame = (event: SseEvent): string => `${event.event === undefined ? '' : `event: ${event.event}\n`}data: ${event.data}\n\n`

/** Starts an event stream; chunked, so a cut before the end is visible to the client as one. */
export const writeSseHead = (res: ServerResponse): void => {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' })
}

/** Writes events in order and resolves once they were handed to the socket. */
export const writeSseEvents = (res: ServerResponse, events: ReadonlyArray<SseEvent>, chunkDelayMs = 0): Promise<void> => {
  if (chunkDelayMs <= 0 || events.length < 2) {
    return new Promise((resolve) => {
      if (events.length === 0) return resolve()
      res.write(events.map(sseFrame).join(''), () => resolve())
    })
  }
  // One event at a time, `chunkDelayMs` apart: a slow stream, which a client may leave midway.
  return (async () => {
    for (const [i, event] of events.entries()) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, chunkDelayMs))
      if (res.destroyed || res.writableEnded) return
      await new Promise<void>((resolve) => res.write(sseFrame(event), () => resolve()))
    }
  })()
}

/**
 * Splits text into up to `count` non-empty pieces of near-equal length, so a streamed answer arrives
 * as several deltas and the client's reassembly is actually exercised.
 */
export const splitInPieces = (text: string, count = 3): string[] => {
  if (text.length === 0) return []
  const size = Math.ceil(text.length / count)
  const pieces: string[] = []
  for (let start = 0; start < text.length; start += size) pieces.push(text.slice(start, start + size))
  return pieces
}

/** The part of a text sent before a scripted stream cut: the first half, rounded up. */
export const firstHalf = (text: string): string => text.slice(0, Math.ceil(text.length / 2))
