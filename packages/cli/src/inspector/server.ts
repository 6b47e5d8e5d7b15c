import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { openStore, type Store } from '@agentvisor/store'
import { makeInspectorAuth } from './auth.js'
import { makeChangeFeed } from './change-feed.js'
import { makeEventStreams } from './event-streams.js'
import { sendError } from './http.js'
import { makeOwnAgentvisor } from './own-agentvisor.js'
import { inspectorPage } from './page.js'
import { isLoopbackName, makeInspectorRouter } from './router.js'

/** The port `agentvisor inspect` listens on unless told otherwise. */
export const DEFAULT_INSPECTOR_PORT = 4380

export interface InspectorOptions {
  /** The SQLite file of the store (created and migrated if absent). */
  readonly db: string
  /** 0 picks a free port (default 4380). */
  readonly port?: number
  /** The address to bind (default 127.0.0.1). */
  readonly host?: string
  /**
   * Whether every request must prove it holds the secret token made at start (default true;
   * docs/inspector.md, "Security"). `false` opens the inspector to whoever reaches its port.
   */
  readonly token?: boolean
  /** How often the store is polled for changes pushed to open pages (default 300 ms). */
  readonly pollMs?: number
}

/** A running inspector. */
export interface Inspector {
  /**
   * Where to open the page: `http://127.0.0.1:4380/?token=...` (`http://127.0.0.1:4380/`
   * without a token). Secret while it holds the token: print it only to whom may decide.
   */
  readonly url: string
  /** The token API calls send as `Authorization: Bearer TOKEN`; undefined with `token: false`. */
  readonly token: string | undefined
  /** The store file it reads. */
  readonly db: string
  /**
   * Stops serving and closes the store. Runs this inspector was driving (after an approval)
   * are interrupted without a final transition and stay resumable, as after a crash.
   */
  close(): Promise<void>
}

const listen = (server: Server, port: number, host: string): Promise<void> =>
  new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })

/**
 * Serves the inspector: one page and a small JSON API over the store (router.ts), with
 * Server-Sent Events telling open pages which runs changed. Bound to 127.0.0.1 by default, and
 * answering only the holder of the token it makes at start.
 *
 * @example
 * const inspector = await startInspector({ db: '.agentvisor/agentvisor.db', port: 0 })
 * console.log(inspector.url) // http://127.0.0.1:41327/?token=...
 * await inspector.close()
 */
export const startInspector = async (options: InspectorOptions): Promise<Inspector> => {
  // Before the store is opened: an install without the page's files fails here, in one line.
  const page = inspectorPage()
  const host = options.host ?? '127.0.0.1'
  // Reads go through this store. Its one write (a decision) is a single transaction that runs
  // between two I/O callbacks, like every write of the Agentvisor's own store below, so the two
  // connections of this process never wait on each other's lock (see openStore's notes).
  // Read-only where the store cannot be written (docs/cli.md, "Read-only stores"): decisions then fail.
  const store: Store = await openStore(options.db, { readOnly: 'if-unwritable' })
  const feed = makeChangeFeed(store.db, options.pollMs ?? 300)
  const streams = makeEventStreams(feed)
  const agentvisor = makeOwnAgentvisor(options.db, feed)
  const auth = makeInspectorAuth({ token: options.token ?? true, port: () => (server.address() as AddressInfo).port })
  const route = makeInspectorRouter({ store, feed, page, auth, streams, agentvisor, loopback: isLoopbackName(host) })
  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => sendError(res, error))
  })

  try {
    await listen(server, options.port ?? DEFAULT_INSPECTOR_PORT, host)
  } catch (error) {
    feed.close()
    await store.close()
    throw error
  }
  const { port } = server.address() as AddressInfo
  const urlHost = host.includes(':') ? `[${host}]` : host

  let closing: Promise<void> | undefined
  return {
    url: `http://${urlHost}:${port}/${auth.token === undefined ? '' : `?token=${auth.token}`}`,
    token: auth.token,
    db: store.file,
    close: () => {
      closing ??= (async () => {
        feed.close()
        streams.close()
        const closed = new Promise<void>((resolve) => server.close(() => resolve()))
        server.closeAllConnections()
        await closed
        await agentvisor.close()
        await store.close()
      })()
      return closing
    }
  }
}
