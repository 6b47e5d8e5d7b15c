import type { IncomingMessage, ServerResponse } from 'node:http'
import { RunStatus, type Store } from '@agentvisor/store'
import { answerFromInspector, parseAnswerBody } from './answer-action.js'
import type { InfoView } from './api-types.js'
import { decideFromInspector, parseApprovalBody } from './approval-action.js'
import { type InspectorAuth, refuseForeignPages } from './auth.js'
import type { ChangeFeed } from './change-feed.js'
import type { EventStreams } from './event-streams.js'
import { HttpError, readJsonBody, sendJson } from './http.js'
import { runMachineGraph } from './machine-graph.js'
import type { OwnAgentvisor } from './own-agentvisor.js'
import type { InspectorPage } from './page.js'
import { cancelFromInspector, forkFromInspector, parseForkBody, type RunActionDeps, resumeFromInspector } from './run-action.js'
import { listRunItems, loadRunView } from './run-view.js'

/** What the inspector's routes answer from. */
export interface RouterDeps {
  readonly store: Store
  readonly feed: ChangeFeed
  readonly page: InspectorPage
  readonly auth: InspectorAuth
  readonly streams: EventStreams
  readonly agentvisor: OwnAgentvisor
  /** Bound to a loopback address: only requests addressed to a loopback name are served. */
  readonly loopback: boolean
}

/** Answers one request; a refusal is thrown as an HttpError for the server to send. */
export type InspectorHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>

/** One API route: `/api/` then `path`, where `:name` stands for any one segment, given to `handle` by name. */
interface ApiRoute {
  readonly method: 'GET' | 'POST'
  readonly path: ReadonlyArray<string>
  readonly handle: (call: ApiCall) => Promise<void> | void
}

interface ApiCall {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly url: URL
  readonly params: Readonly<Record<string, string>>
}

const STATUSES: ReadonlyArray<string> = Object.values(RunStatus)
const isRunStatus = (text: string): text is RunStatus => STATUSES.includes(text)
const LOOPBACK_NAMES: ReadonlySet<string> = new Set(['127.0.0.1', 'localhost', '[::1]', '::1'])

/** Whether `host` is a loopback name, the only ones a loopback-bound inspector answers. */
export const isLoopbackName = (host: string): boolean => LOOPBACK_NAMES.has(host)

const hostnameOf = (header: string | undefined): string | undefined => {
  if (header === undefined) return undefined
  try {
    return new URL(`http://${header}`).hostname
  } catch {
    return undefined
  }
}

const segmentsOf = (url: URL): string[] => {
  try {
    return url.pathname
      .split('/')
      .filter((p) => p !== '')
      .map(decodeURIComponent)
  } catch {
    throw new HttpError({ status: 400, message: 'the path is not valid' })
  }
}

/** The named segments of `parts` when it has the route's shape, else undefined. */
const matchPath = (pattern: ReadonlyArray<string>, parts: ReadonlyArray<string>): Record<string, string> | undefined => {
  if (pattern.length !== parts.length) return undefined
  const params: Record<string, string> = {}
  for (const [i, segment] of pattern.entries()) {
    const part = parts[i]!
    if (segment.startsWith(':')) params[segment.slice(1)] = part
    else if (segment !== part) return undefined
  }
  return params
}

const refuseMethod = (res: ServerResponse, method: string, allowed: string): never => {
  res.setHeader('allow', allowed)
  throw new HttpError({ status: 405, message: `${method} is not allowed here (${allowed} is)` })
}

/** `POST /api/runs/:id/resume` or `/cancel`, through the use cases `agentvisor resume` and `cancel` use. */
const runAction = (action: 'resume' | 'cancel', actions: RunActionDeps, feed: ChangeFeed): ApiRoute => ({
  method: 'POST',
  path: ['runs', ':runId', action],
  handle: async ({ req, res, params }) => {
    const runId = params['runId']!
    // The body is not read (an action takes none), but a form posted from elsewhere is refused by type.
    await readJsonBody(req)
    const outcome = action === 'resume' ? await resumeFromInspector(actions, runId) : await cancelFromInspector(actions, runId)
    feed.notify([runId])
    sendJson(res, 200, outcome)
  }
})

/** The JSON API (docs/inspector.md, "The JSON API"): each POST answers only the page itself, and tells open pages what it changed. */
const apiRoutes = (deps: RouterDeps): ReadonlyArray<ApiRoute> => {
  const { store, feed } = deps
  const actions: RunActionDeps = { db: store.db, drive: deps.agentvisor.drive, agentvisor: deps.agentvisor.get }
  const decisions = { db: store.db, drive: deps.agentvisor.drive }
  return [
    { method: 'GET', path: ['info'], handle: ({ res }) => sendJson(res, 200, { db: store.file } satisfies InfoView) },
    { method: 'GET', path: ['machine'], handle: ({ res }) => sendJson(res, 200, runMachineGraph()) },
    { method: 'GET', path: ['events'], handle: ({ req, res }) => deps.streams.open(req, res) },
    {
      method: 'GET',
      path: ['runs'],
      handle: async ({ res, url }) => {
        const status = url.searchParams.get('status') ?? ''
        if (status !== '' && !isRunStatus(status)) {
          throw new HttpError({ status: 400, message: `status must be one of ${STATUSES.join(', ')} (got "${status}")` })
        }
        sendJson(res, 200, await listRunItems(store.db, status === '' ? undefined : status))
      }
    },
    {
      method: 'GET',
      path: ['runs', ':runId'],
      handle: async ({ res, params }) => {
        const view = await loadRunView(store.db, params['runId']!)
        if (view === undefined) throw new HttpError({ status: 404, message: `no run with id ${params['runId']}` })
        sendJson(res, 200, view)
      }
    },
    {
      method: 'POST',
      path: ['runs', ':runId', 'fork'],
      handle: async ({ req, res, params }) => {
        const runId = params['runId']!
        const fork = await forkFromInspector(actions, runId, parseForkBody(await readJsonBody(req)))
        feed.notify([runId, fork.runId])
        sendJson(res, 200, fork)
      }
    },
    runAction('resume', actions, feed),
    runAction('cancel', actions, feed),
    {
      method: 'POST',
      path: ['runs', ':runId', 'approvals', ':requestId'],
      handle: async ({ req, res, params }) => {
        const runId = params['runId']!
        const outcome = await decideFromInspector(decisions, runId, params['requestId']!, parseApprovalBody(await readJsonBody(req)))
        feed.notify([runId])
        sendJson(res, 200, outcome)
      }
    },
    {
      method: 'POST',
      path: ['runs', ':runId', 'answers', ':requestId'],
      handle: async ({ req, res, params }) => {
        const runId = params['runId']!
        const outcome = await answerFromInspector(decisions, runId, params['requestId']!, parseAnswerBody(await readJsonBody(req)))
        feed.notify([runId])
        sendJson(res, 200, outcome)
      }
    }
  ]
}

/**
 * The inspector's routes: the page (`/`) and its files (`/assets/`), then the JSON API, each
 * for the token's holder only (docs/inspector.md, "Security").
 */
export const makeInspectorRouter = (deps: RouterDeps): InspectorHandler => {
  const { auth, page } = deps
  const routes = apiRoutes(deps)
  return async (req, res) => {
    // A page on another site may resolve its own name to 127.0.0.1 (DNS rebinding): only
    // requests addressed to a loopback name are served when bound to loopback.
    if (deps.loopback && !isLoopbackName(hostnameOf(req.headers.host) ?? '')) {
      throw new HttpError({ status: 403, message: 'the inspector answers only requests addressed to 127.0.0.1 or localhost' })
    }
    const url = new URL(req.url ?? '/', 'http://inspector.invalid')
    const parts = segmentsOf(url)
    const method = req.method ?? 'GET'

    if (parts.length === 1 && parts[0] === 'favicon.ico') {
      res.writeHead(204).end()
      return
    }
    if (parts.length === 0) {
      if (method !== 'GET') refuseMethod(res, method, 'GET')
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
      if (method !== 'GET') refuseMethod(res, method, 'GET')
      // The page's own modules and stylesheet: loaded with its cookie, like everything else it asks for.
      auth.admitApi(req)
      const asset = page.assets.get(parts[1]!)
      if (asset === undefined) throw new HttpError({ status: 404, message: `nothing at ${url.pathname}` })
      res.writeHead(200, { 'content-type': asset.contentType, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' })
      res.end(asset.body)
      return
    }
    if (parts[0] !== 'api') throw new HttpError({ status: 404, message: `nothing at ${url.pathname}` })
    auth.admitApi(req)
    const path = parts.slice(1)
    const matching = routes.flatMap((route) => {
      const params = matchPath(route.path, path)
      return params === undefined ? [] : [{ route, params }]
    })
    if (matching.length === 0) throw new HttpError({ status: 404, message: `nothing at ${url.pathname}` })
    const chosen = matching.find(({ route }) => route.method === method)
    if (chosen === undefined) return refuseMethod(res, method, matching[0]!.route.method)
    if (chosen.route.method === 'POST') refuseForeignPages(req)
    await chosen.route.handle({ req, res, url, params: chosen.params })
  }
}
