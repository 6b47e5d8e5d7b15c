import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { HttpError } from './http.js'

/**
 * Who may use the inspector (docs/inspector.md, "Security"): the holder of the secret token it
 * makes when it starts. The token reaches a browser once, in the URL the inspector prints; the
 * page load that carries it sets an HttpOnly, SameSite=Strict cookie, and every later request
 * (the API, the event stream, the page) proves itself with that cookie or with an
 * `Authorization: Bearer` header. The token lives only in this process's memory.
 */
export interface InspectorAuth {
  /** The token, for the one URL printed; undefined when the inspector runs without one. */
  readonly token: string | undefined
  /**
   * Whether the request may see the page: it holds the cookie, or names the token in `?token=`.
   * Returns the `Set-Cookie` value to send when it named it (so later requests need not), else
   * undefined; throws a 401 otherwise.
   */
  admitPage(req: IncomingMessage, query: URLSearchParams): string | undefined
  /** Throws a 401 unless the request holds the cookie or the bearer token. */
  admitApi(req: IncomingMessage): void
}

/** 24 random bytes: 192 bits, 32 URL-safe characters. */
const TOKEN_BYTES = 24

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest()

/** Cookies are shared by every port of a host: the name carries the port, so two inspectors do not overwrite each other's. */
const cookieNameOf = (port: number): string => `agentvisor_inspector_${port}`

const cookiesNamed = (header: string | undefined, name: string): string[] =>
  (header ?? '')
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part.startsWith(`${name}=`))
    .map((part) => part.slice(name.length + 1))

const bearerOf = (header: string | undefined): string | undefined => {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')
  return match?.[1]
}

const REFUSED_API =
  'this inspector needs its token: open the URL it printed (with ?token=), or send Authorization: Bearer TOKEN (agentvisor inspect --no-token turns it off)'
const REFUSED_PAGE = 'this inspector needs its token: open the URL it printed, http://HOST:PORT/?token=... (it makes a new one each time it starts)'

/**
 * The inspector's access check, with a fresh token, or none at all (`--no-token`). `port`
 * names the cookie and is read once the server listens.
 */
export const makeInspectorAuth = (options: { readonly token: boolean; readonly port: () => number }): InspectorAuth => {
  if (!options.token) return { token: undefined, admitPage: () => undefined, admitApi: () => {} }
  const token = randomBytes(TOKEN_BYTES).toString('base64url')
  const expected = digest(token)
  // Compared as digests of equal length, in constant time: the time taken says nothing of how much of a guess was right.
  const matches = (given: string | undefined): boolean => given !== undefined && timingSafeEqual(digest(given), expected)
  const holdsCookie = (req: IncomingMessage): boolean => cookiesNamed(req.headers.cookie, cookieNameOf(options.port())).some(matches)
  return {
    token,
    admitPage: (req, query) => {
      if (matches(query.get('token') ?? undefined)) {
        return `${cookieNameOf(options.port())}=${token}; Path=/; HttpOnly; SameSite=Strict`
      }
      if (holdsCookie(req)) return undefined
      throw new HttpError({ status: 401, message: REFUSED_PAGE })
    },
    admitApi: (req) => {
      if (holdsCookie(req) || matches(bearerOf(req.headers.authorization))) return
      throw new HttpError({ status: 401, message: REFUSED_API })
    }
  }
}

const originOf = (url: string): string | undefined => {
  try {
    return new URL(url).origin
  } catch {
    return undefined
  }
}

/**
 * Refuses a state-changing request that a page of another site made: its `Origin` is not the
 * inspector's own, its `Sec-Fetch-Site` is anything but `same-origin`, or its `Referer` is on
 * another origin. A browser always sends at least one of them; a script (curl, fetch in Node)
 * sends none and is judged by its token alone.
 */
export const refuseForeignPages = (req: IncomingMessage): void => {
  const own = `http://${req.headers.host ?? ''}`
  const origin = req.headers.origin
  const site = req.headers['sec-fetch-site']
  const referer = req.headers.referer
  const foreign =
    (origin !== undefined && origin !== own) || (site !== undefined && site !== 'same-origin') || (referer !== undefined && originOf(referer) !== own)
  if (foreign) throw new HttpError({ status: 403, message: 'decisions are accepted only from the inspector page itself' })
}
