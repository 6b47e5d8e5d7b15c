import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js'
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js'
import { maskUrlCredentials } from '../../secrets/url-credentials.js'
import { type McpServerErrorReason, McpServerError, mcpServerLabel } from './mcp-errors.js'
import type { ResolvedHttpServer, ResolvedStdioServer } from './mcp-server-spec.js'
import type { McpSessionOptions } from './mcp-session.js'
import type { ChildProcessTransport } from './mcp-stdio-transport.js'

// Why an MCP server failed, said in one line naming it (docs/tools.md, "MCP servers"): what a
// session's start rejects with, and what a call's failure tells the model.

/** The SDK's Streamable HTTP client module (mcp-start.ts loads it when the first HTTP server starts). */
export type HttpClientModule = typeof import('@modelcontextprotocol/sdk/client/streamableHttp.js')

export const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, ' ').trim()

export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** The errno code of an error or of its cause (fetch wraps a refused connection's). */
const errnoCode = (error: unknown): string | undefined => {
  for (let at: unknown = error, depth = 0; at !== undefined && at !== null && depth < 4; depth++) {
    if (typeof at !== 'object') return undefined
    if ('code' in at && typeof at.code === 'string') return at.code
    // An AggregateError (every address of a host refused) holds its causes in `errors`.
    if ('errors' in at && Array.isArray(at.errors) && at.errors.length > 0) at = at.errors[0]
    else at = 'cause' in at ? at.cause : undefined
  }
  return undefined
}

const NETWORK_REASONS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  UND_ERR_SOCKET: 'connection closed by the server',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out'
}

/** Why fetch could not reach the server at all (no HTTP answer), or undefined when the error is not that. */
const networkReason = (error: unknown): string | undefined => {
  if (!(error instanceof TypeError)) return undefined
  const code = errnoCode(error)
  if (code !== undefined) return NETWORK_REASONS[code] ?? code
  // fetch's own refusals (a port it never connects to) say why in their cause.
  if (error.message === 'fetch failed') return error.cause instanceof Error ? error.cause.message : 'fetch failed'
  return undefined
}

/** An HTTP-level problem as a short reason, or undefined when the error is not one. */
export const httpProblem = (
  http: HttpClientModule,
  url: string,
  error: unknown
): { reason: McpServerErrorReason; text: string; status?: number } | undefined => {
  const shown = maskUrlCredentials(url)
  if (error instanceof UnauthorizedError) return { reason: 'refused', text: `${shown} refused the connection (HTTP 401): check its headers` }
  if (error instanceof http.StreamableHTTPError) {
    const status = error.code ?? -1
    if (status === 401 || status === 403) return { reason: 'refused', text: `${shown} refused the connection (HTTP ${status}): check its headers` }
    if (status === 404) return { reason: 'refused', text: `${shown} answered HTTP 404 (not an MCP endpoint, or its session ended)`, status }
    if (status > 0) return { reason: 'refused', text: `${shown} answered HTTP ${status}` }
    return { reason: 'protocol', text: `${shown} did not answer as an MCP server (${messageOf(error).replace('Streamable HTTP error: ', '')})` }
  }
  const unreachable = networkReason(error)
  if (unreachable !== undefined) return { reason: 'unreachable', text: `cannot reach ${shown}: ${unreachable}` }
  return undefined
}

/** How a stdio server ended (`exited with code 1`), `when` it did, and the last lines of its stderr. */
export const describeExit = (transport: ChildProcessTransport, when = ''): string => {
  const exit = transport.exit
  const how =
    transport.problem ??
    (exit === undefined ? 'its connection closed' : exit.code !== null ? `exited with code ${exit.code}` : `was ended by ${exit.signal ?? 'a signal'}`)
  const tail = transport.stderrTail()
  return `${how}${when}${tail === '' ? '' : `; stderr: ${tail}`}`
}

export const serverError = (server: string, reason: McpServerErrorReason, text: string, redact: (text: string) => string): McpServerError =>
  new McpServerError({ server, reason, message: oneLine(redact(`${mcpServerLabel(server)}: ${text}`)) })

/** Why a stdio server did not start, once its process is gone (so that its stderr has been read to the end). */
export const stdioStartError = (
  server: string,
  launch: ResolvedStdioServer,
  transport: ChildProcessTransport,
  exitedByItself: boolean,
  error: unknown,
  options: McpSessionOptions
): McpServerError => {
  const fail = (reason: McpServerErrorReason, text: string) => serverError(server, reason, text, options.redact)
  if (transport.pid === undefined) {
    const code = errnoCode(error)
    if (code === 'ENOENT') return fail('spawn', `command "${launch.command}" not found`)
    if (code === 'EACCES') return fail('spawn', `command "${launch.command}" cannot be run (permission denied)`)
    return fail('spawn', `command "${launch.command}" could not be started (${code ?? messageOf(error)})`)
  }
  if (exitedByItself) return fail('exited', describeExit(transport, ' before it answered'))
  if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) return fail('timeout', `did not answer within ${options.startTimeoutMs} ms`)
  return fail('protocol', `failed to start: ${messageOf(error)}`)
}

export const httpStartError = (
  http: HttpClientModule,
  server: string,
  launch: ResolvedHttpServer,
  error: unknown,
  options: McpSessionOptions
): McpServerError => {
  const problem = httpProblem(http, launch.url, error)
  if (problem !== undefined) return serverError(server, problem.reason, problem.text, options.redact)
  if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
    return serverError(server, 'timeout', `did not answer within ${options.startTimeoutMs} ms`, options.redact)
  }
  return serverError(server, 'protocol', `failed to start: ${messageOf(error)}`, options.redact)
}
