import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ChangedMessage } from './api-types.js'
import type { ChangeFeed } from './change-feed.js'

/** The open `GET /api/events` streams (docs/inspector.md, "Live updates"). */
export interface EventStreams {
  /** Answers the request with a stream that tells the page which runs changed, until it goes away. */
  open(req: IncomingMessage, res: ServerResponse): void
  /** Ends every open stream (the server is closing). */
  close(): void
}

const KEEP_ALIVE_MS = 15_000

/** Server-Sent Events fed by `feed`: one `changed` message per batch of runs, and a comment now and then to keep proxies from closing an idle stream. */
export const makeEventStreams = (feed: ChangeFeed): EventStreams => {
  const open = new Set<ServerResponse>()
  return {
    open: (req, res) => {
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        connection: 'keep-alive'
      })
      // A page that went away mid-write is not an error worth more than dropping its stream.
      res.on('error', () => {})
      const send = (text: string): void => {
        if (!res.destroyed && !res.writableEnded) res.write(text)
      }
      send('retry: 1000\n: connected\n\n')
      open.add(res)
      const unsubscribe = feed.subscribe((runIds) => {
        const message: ChangedMessage = { type: 'changed', runIds }
        send(`data: ${JSON.stringify(message)}\n\n`)
      })
      const ping = setInterval(() => send(': keep-alive\n\n'), KEEP_ALIVE_MS)
      req.once('close', () => {
        clearInterval(ping)
        unsubscribe()
        open.delete(res)
      })
    },
    close: () => {
      for (const res of open) res.end()
    }
  }
}
