import { answerFromInspector, parseAnswerBody } from './answer-action.js'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Agentvisor } from '@agentvisor/actors'
import { openStore, RunStatus, type Store, StoreError } from '@agentvisor/store'
import { decideFromInspector, parseApprovalBody } from './approval-action.js'
import { makeInspectorAuth, refuseForeignPages } from './auth.js'
import { makeChangeFeed } from './change-feed.js'
import { HttpError, readJsonBody, sendJson } from './http.js'
import { runMachineGraph } from './machine-graph.js'
import { cancelFromInspector, forkFromInspector, parseForkBody, resumeFromInspector } from './run-action.js'
import { inspectorPage } from './page.js'
import { listRunItems, loadRunView } from './run-view.js'

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

const STATUSES: ReadonlyArray<string> = Object.values(RunStatus)
const KEEP_ALIVE_MS = 15_000
const LOOPBACK_NAMES: ReadonlySet<string> = new Set(['127.0.0.1', 'localhost', '[::1]', '::1'])

const hostnameOf = (header: string | undefined): string | undefined => {
  if (header === undefined) return undefined
  try {
    return new URL(`http://${header}`).hostname
  } catch {
    return undefined
  }
}

/**
 * Serves the inspector: one self-contained page and a small JSON API over the store, with
 * Server-Sent Events telling open pages which runs changed. Bound to 127.0.0.1 by default, and
 * answering only the holder of the token it makes at start.
 *
 * @example
 * const inspector = await startInspector({ db: '.agentvisor/agentvisor.db', port: 0 })
 * console.log(inspector.url) // http://127.0.0.1:41327/?token=...
 * await inspector.close()
 */
export const startInspector = async (options: InspectorOptions): Promise<Inspector> => {
  const page = inspectorPage()
  const host = options.host ?? '127.0.0.1'
  const loopback = LOOPBACK_NAMES.has(host)
  // Reads go through this store. Its one write (a decision) is a single transaction that runs
  // between two I/O callbacks, like every write of the Agentvisor's own store below, so the two
  // connections of this process never wait on each other's lock (see openStore's notes).
  // Read-only where the store cannot be written (docs/cli.md, "Read-only stores"): decisions then fail.
  const store: Store = await openStore(options.db, { readOnly: 'if-unwritable' })
  const feed = makeChangeFeed(store.db, options.pollMs ?? 300)
  const streams = new Set<ServerResponse>()
  const auth = makeInspectorAuth({ token: options.token ?? true, port: () => (server.address() as AddressInfo).port })

  // Opened on the first action that drives or cancels a run, and kept for the server's life.
  let agentvisor: Promise<Agentvisor> | undefined
  const ownAgentvisor = (): Promise<Agentvisor> =>
    (agentvisor ??= Agentvisor.open({ db: options.db }).catch((error: unknown) => {
      agentvisor = undefined
      throw error
    }))
  const drive = async (runId: string): Promise<void> => {
    const started = await (await ownAgentvisor()).resume(runId)
    void started.result.then(
      () => feed.notify([runId]),
      () => {}
    )
  }

  const openEvents = (req: IncomingMessage, res: ServerResponse): void => {
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
    streams.add(res)
    const unsubscribe = feed.subscribe((runIds) => send(`data: ${JSON.stringify({ type: 'changed', runIds })}\n\n`))
    const ping = setInterval(() => send(': keep-alive\n\n'), KEEP_ALIVE_MS)
    req.once('close', () => {
      clearInterval(ping)
      unsubscribe()
      streams.delete(res)
    })
  }

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // A page on another site may resolve its own name to 127.0.0.1 (DNS rebinding): only
    // requests addressed to a loopback name are served when bound to loopback.
    if (loopback && !LOOPBACK_NAMES.has(hostnameOf(req.headers.host) ?? '')) {
      throw new HttpError({ status: 403, message: 'the inspector answers only requests addressed to 127.0.0.1 or localhost' })
    }
    const url = new URL(req.url ?? '/', 'http://inspector.invalid')
    let parts: string[]
    try {
      parts = url.pathname
        .split('/')
        .filter((p) => p !== '')
        .map(decodeURIComponent)
    } catch {
      throw new HttpError({ status: 400, message: 'the path is not valid' })
    }
    const method = req.method ?? 'GET'
    const only = (allowed: string): void => {
      if (method !== allowed) {
        res.setHeader('allow', allowed)
        throw new HttpError({ status: 405, message: `${method} is not allowed here (${allowed} is)` })
      }
    }

    if (parts.length === 1 && parts[0] === 'favicon.ico') {
      res.writeHead(204).end()
      return
    }
    if (parts.length === 0) {
      only('GET')
      // The page itself holds nothing, but it is shown only to the token's holder, who gets the
      // cookie here; the page then takes `?token=` out of the address bar. A redirect would
      // lose the SameSite=Strict cookie when the link was followed from another site's page.
      const cookie = auth.admitPage(req, url.searchParams)
      res.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'content-security-policy': page.csp,
        'cache-control': 'no-store',
        'referrer-policy': 'no-referrer',
        'x-content-type-options': 'nosniff',
        ...(cookie === undefined ? {} : { 'set-cookie': cookie })
      })
      res.end(page.html)
      return
    }
    if (parts[0] === 'assets' && parts.length === 2) {
      only('GET')
      auth.admitApi(req)
      const asset = page.assets.get(parts[1]!)
      if (asset === undefined) throw new HttpError({ status: 404, message: `nothing at ${url.pathname}` })
      res.writeHead(200, { 'content-type': asset.contentType, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' })
      res.end(asset.body)
      return
    }
    if (parts[0] !== 'api') throw new HttpError({ status: 404, message: `nothing at ${url.pathname}` })
    auth.admitApi(req)
    const [, resource, runId, sub, requestId, ...extra] = parts

    if (resource === 'info' && runId === undefined) {
      only('GET')
      return sendJson(res, 200, { db: store.file })
    }
    if (resource === 'machine' && runId === undefined) {
      only('GET')
      return sendJson(res, 200, runMachineGraph())
    }
    if (resource === 'events' && runId === undefined) {
      only('GET')
      return openEvents(req, res)
    }
    if (resource === 'runs' && runId === undefined) {
      only('GET')
      const status = url.searchParams.get('status') ?? ''
      if (status !== '' && !STATUSES.includes(status)) {
        throw new HttpError({ status: 400, message: `status must be one of ${STATUSES.join(', ')} (got "${status}")` })
      }
      return sendJson(res, 200, await listRunItems(store.db, status === '' ? undefined : (status as RunStatus)))
    }
    if (resource === 'runs' && runId !== undefined && sub === undefined) {
      only('GET')
      const view = await loadRunView(store.db, runId)
      if (view === undefined) throw new HttpError({ status: 404, message: `no run with id ${runId}` })
      return sendJson(res, 200, view)
    }
    const fromThePage = (): void => refuseForeignPages(req)
    if (resource === 'runs' && runId !== undefined && sub === 'fork' && requestId === undefined) {
      only('POST')
      fromThePage()
      const seq = parseForkBody(await readJsonBody(req))
      const fork = await forkFromInspector({ db: store.db, drive, agentvisor: ownAgentvisor }, runId, seq)
      feed.notify([runId, fork.runId])
      return sendJson(res, 200, fork)
    }
    if (resource === 'runs' && runId !== undefined && (sub === 'resume' || sub === 'cancel') && requestId === undefined) {
      only('POST')
      fromThePage()
      // The body is not read (an action takes none), but a form posted from elsewhere is refused by type.
      await readJsonBody(req)
      const deps = { db: store.db, drive, agentvisor: ownAgentvisor }
      const outcome = sub === 'resume' ? await resumeFromInspector(deps, runId) : await cancelFromInspector(deps, runId)
      feed.notify([runId])
      return sendJson(res, 200, outcome)
    }
    if (resource === 'runs' && runId !== undefined && (sub === 'approvals' || sub === 'answers') && requestId !== undefined && extra.length === 0) {
      only('POST')
      fromThePage()
      const json = await readJsonBody(req)
      const outcome =
        sub === 'answers'
          ? await answerFromInspector({ db: store.db, drive }, runId, requestId, parseAnswerBody(json))
          : await decideFromInspector({ db: store.db, drive }, runId, requestId, parseApprovalBody(json))
      feed.notify([runId])
      return sendJson(res, 200, outcome)
    }
    throw new HttpError({ status: 404, message: `nothing at ${url.pathname}` })
  }

  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      if (res.headersSent) {
        res.end()
        return
      }
      if (error instanceof HttpError) {
        if (error.status === 401) res.setHeader('www-authenticate', 'Bearer realm="agentvisor inspector"')
        sendJson(res, error.status, { error: error.message })
        return
      }
      // A corrupt row is reported as the store names it (docs/durability.md, "Corrupt rows"); the server goes on.
      if (error instanceof StoreError && error.column !== undefined) {
        sendJson(res, 500, { error: error.message })
        return
      }
      const message = error instanceof Error ? error.message.split('\n')[0] : String(error)
      sendJson(res, 500, { error: `internal error: ${message}` })
    })
  })

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(options.port ?? DEFAULT_INSPECTOR_PORT, host, () => {
        server.off('error', reject)
        resolve()
      })
    })
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
        for (const res of streams) res.end()
        const closed = new Promise<void>((resolve) => server.close(() => resolve()))
        server.closeAllConnections()
        await closed
        if (agentvisor !== undefined) await (await agentvisor.catch(() => undefined))?.close()
        await store.close()
      })()
      return closing
    }
  }
}
