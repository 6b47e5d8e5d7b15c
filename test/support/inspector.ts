import type { Inspector } from '../../packages/cli/src/inspector/server.js'

/**
 * A request to an inspector's API as a script makes it: `path` (e.g. `/api/runs`) on the
 * inspector's origin, with its token as `Authorization: Bearer` (none under `token: false`).
 */
export const inspectorFetch = (inspector: Inspector, path: string, init: RequestInit = {}): Promise<Response> => {
  const headers = new Headers(init.headers)
  if (inspector.token !== undefined && !headers.has('authorization')) headers.set('authorization', `Bearer ${inspector.token}`)
  return fetch(new URL(path, inspector.url), { ...init, headers })
}

/** A JSON POST to an inspector's API, with its token. */
export const inspectorPost = (inspector: Inspector, path: string, body: string, headers: Record<string, string> = {}): Promise<Response> =>
  inspectorFetch(inspector, path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })
