import { existsSync } from 'node:fs'
import { quoteName } from '../../contract/quote-name.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js'
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type CallToolResult, ErrorCode, McpError, ResultSchema, type Tool, ToolSchema } from '@modelcontextprotocol/sdk/types.js'
import { MAX_TIMER_MS } from '../../provider/scripted-step.js'
import { maskUrlCredentials } from '../../secrets/url-credentials.js'
import type { ToolArguments } from '../tool-definition.js'
import { failed, type ToolOutcome } from '../tool-outcome.js'
import { type McpServerErrorReason, McpServerError, mcpServerLabel } from './mcp-errors.js'
import { mcpOutputSchemaValidator } from './mcp-json-schema.js'
import { mcpResultOutcome } from './mcp-outcome.js'
import type { ResolvedHttpServer, ResolvedStdioServer } from './mcp-server-spec.js'
import { ChildProcessTransport, NotSentError } from './mcp-stdio-transport.js'

/*
 * One connection to one MCP server through the SDK's client (docs/tools.md, "MCP servers"):
 * started, its tools listed, called, watched for its end and closed. It knows nothing of
 * restarts or of other servers: the pool does.
 */

/** How agentvisor introduces itself to a server. */
const CLIENT_INFO = { name: 'agentvisor', version: '0.1.0' }

/** What the server is told when a call is cancelled (the SDK sends it in `notifications/cancelled`). */
const CANCEL_REASON = 'cancelled by agentvisor: the run was cancelled or timed out'

/** How a session is opened. */
export interface McpSessionOptions {
  /** The environment a stdio server inherits its few variables (PATH, HOME, ...) from. */
  readonly inheritedEnv: NodeJS.ProcessEnv
  /** How long starting, `initialize` and `tools/list` may take in all. */
  readonly startTimeoutMs: number
  /** Between closing a stdio server's stdin, SIGTERM and SIGKILL. */
  readonly killGraceMs: number
  /** Removes the server's secret values from a text shown to anyone. */
  readonly redact: (text: string) => string
}

/** A started server: its tools, and calls to it. */
export interface McpSession {
  /** Every tool it listed, all pages, in its order. */
  readonly tools: ReadonlyArray<Tool>
  /**
   * Why it can no longer be called (`exited with code 1; stderr: ...`); undefined while it can.
   * Set as soon as a stdio server's process exits, before `onDown` (which waits for its pipes).
   */
  readonly downReason: () => string | undefined
  /** Told once, when the session goes down by itself (its process ended, its URL stopped answering); not on `close`. */
  onDown: ((reason: string) => void) | undefined
  /**
   * One `tools/call`; never rejects: every problem is an `ok: false` outcome naming the server.
   * Undefined when the call was never sent (the session had ended, its process had exited): no
   * server saw it, so another session may perform it.
   */
  readonly call: (tool: string, args: ToolArguments, signal: AbortSignal) => Promise<ToolOutcome | undefined>
  /** Ends the session: a stdio server's process group, an HTTP server's session. */
  readonly close: () => Promise<void>
}

const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, ' ').trim()

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

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

/**
 * The SDK's Streamable HTTP client, loaded when the first HTTP server starts: it pulls in
 * eventsource-parser, which a process with only stdio servers has no use for (and whose
 * `source` export condition, which this repository's test runner turns on, names TypeScript
 * that Node cannot load).
 */
const loadHttpClient = () => import('@modelcontextprotocol/sdk/client/streamableHttp.js')
type HttpClientModule = Awaited<ReturnType<typeof loadHttpClient>>

/** An HTTP-level problem as a short reason, or undefined when the error is not one. */
const httpProblem = (http: HttpClientModule, url: string, error: unknown): { reason: McpServerErrorReason; text: string; status?: number } | undefined => {
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
const describeExit = (transport: ChildProcessTransport, when = ''): string => {
  const exit = transport.exit
  const how =
    transport.problem ??
    (exit === undefined ? 'its connection closed' : exit.code !== null ? `exited with code ${exit.code}` : `was ended by ${exit.signal ?? 'a signal'}`)
  const tail = transport.stderrTail()
  return `${how}${when}${tail === '' ? '' : `; stderr: ${tail}`}`
}

const serverError = (server: string, reason: McpServerErrorReason, text: string, redact: (text: string) => string): McpServerError =>
  new McpServerError({ server, reason, message: oneLine(redact(`${mcpServerLabel(server)}: ${text}`)) })

/** Why a stdio server did not start, once its process is gone (so that its stderr has been read to the end). */
const stdioStartError = (
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

const httpStartError = (http: HttpClientModule, server: string, launch: ResolvedHttpServer, error: unknown, options: McpSessionOptions): McpServerError => {
  const problem = httpProblem(http, launch.url, error)
  if (problem !== undefined) return serverError(server, problem.reason, problem.text, options.redact)
  if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
    return serverError(server, 'timeout', `did not answer within ${options.startTimeoutMs} ms`, options.redact)
  }
  return serverError(server, 'protocol', `failed to start: ${messageOf(error)}`, options.redact)
}

/** A schema library's refusal (the SDK checks every answer with zod): it has `issues`, each with a `path` and a `message`. */
interface SchemaIssues {
  readonly issues: ReadonlyArray<{ readonly path: ReadonlyArray<PropertyKey>; readonly message: string }>
}
const isSchemaError = (error: unknown): error is SchemaIssues =>
  typeof error === 'object' && error !== null && 'issues' in error && Array.isArray(error.issues) && error.issues.length > 0

const issueText = (issue: SchemaIssues['issues'][number]): string =>
  `${issue.path.length === 0 ? 'the tool' : issue.path.map(String).join('.')}: ${issue.message}`

/**
 * Why a `tools/list` page the SDK refused is refused, naming the first tool that does not fit
 * MCP's shape of a tool (`its tool "scalar" cannot be offered: inputSchema.type: Invalid input:
 * expected "object"`): the page is asked again, taken as it comes, and each tool checked alone.
 */
const listingProblem = async (client: Client, params: { cursor: string } | undefined, remainingMs: () => number, refusal: SchemaIssues): Promise<string> => {
  const fallback = `its tools/list answer is not one MCP allows: ${issueText(refusal.issues[0]!)}`
  let tools: unknown
  try {
    tools = (await client.request({ method: 'tools/list', params }, ResultSchema, { timeout: remainingMs() }))['tools']
  } catch {
    return fallback
  }
  if (!Array.isArray(tools)) return 'its tools/list answer has no list of tools'
  for (const [index, tool] of tools.entries()) {
    const checked = ToolSchema.safeParse(tool)
    if (checked.success) continue
    const name = typeof tool === 'object' && tool !== null && 'name' in tool && typeof tool.name === 'string' ? tool.name : undefined
    const which = name === undefined ? `its tool number ${index + 1}` : `its tool ${quoteName(name)}`
    return `${which} cannot be offered: ${issueText(checked.error.issues[0]!)}`
  }
  return fallback
}

/** Every page of `tools/list`; none asked of a server that declares no tools. */
const listAllTools = async (server: string, client: Client, remainingMs: () => number, redact: (text: string) => string): Promise<Tool[]> => {
  if (client.getServerCapabilities()?.tools === undefined) return []
  const tools: Tool[] = []
  const cursors = new Set<string>()
  let cursor: string | undefined
  do {
    const params = cursor === undefined ? undefined : { cursor }
    let page: Awaited<ReturnType<Client['listTools']>>
    try {
      page = await client.listTools(params, { timeout: remainingMs() })
    } catch (error) {
      // The SDK's check of the page refused it: its issue dump names no tool, so say which.
      if (!isSchemaError(error)) throw error
      throw serverError(server, 'tool-schema', await listingProblem(client, params, remainingMs, error), redact)
    }
    tools.push(...page.tools)
    cursor = page.nextCursor
    if (cursor !== undefined) {
      // A server that hands back a cursor it gave before would be listed forever.
      if (cursors.has(cursor)) throw serverError(server, 'protocol', 'its tools/list pages loop (a cursor came back twice)', redact)
      cursors.add(cursor)
    }
  } while (cursor !== undefined)
  return tools
}

/**
 * Starts `launch` (spawns a stdio server, or opens an HTTP session), initialises it and lists
 * its tools, all within `startTimeoutMs`. Rejects with a one-line `McpServerError` naming the
 * server; whatever was started is ended first.
 */
export const openMcpSession = async (server: string, launch: ResolvedStdioServer | ResolvedHttpServer, options: McpSessionOptions): Promise<McpSession> => {
  const deadline = Date.now() + options.startTimeoutMs
  const remainingMs = () => Math.max(1, deadline - Date.now())
  const client = new Client(CLIENT_INFO, { capabilities: {}, jsonSchemaValidator: mcpOutputSchemaValidator })
  // Errors the SDK reports outside any request (a stray line on stdout, a notification stream
  // that failed): the requests they affect fail on their own.
  client.onerror = () => undefined
  let stdio: ChildProcessTransport | undefined
  let http: StreamableHTTPClientTransport | undefined
  let httpClient: HttpClientModule | undefined
  let tools: Tool[]
  if (launch.kind === 'stdio') {
    // Spawning in a missing folder fails as ENOENT, which would blame the command.
    if (!existsSync(launch.cwd)) throw serverError(server, 'spawn', `its cwd ${launch.cwd} does not exist`, options.redact)
    stdio = new ChildProcessTransport(launch, options.inheritedEnv, options.killGraceMs)
    try {
      await client.connect(stdio, { timeout: remainingMs() })
      tools = await listAllTools(server, client, remainingMs, options.redact)
    } catch (error) {
      // Before closing, which ends it too.
      const exitedByItself = stdio.exit !== undefined
      await stdio.close()
      throw error instanceof McpServerError ? error : stdioStartError(server, launch, stdio, exitedByItself, error, options)
    }
  } else {
    httpClient = await loadHttpClient()
    http = new httpClient.StreamableHTTPClientTransport(new URL(launch.url), { requestInit: { headers: { ...launch.headers } } })
    try {
      await client.connect(http, { timeout: remainingMs() })
      tools = await listAllTools(server, client, remainingMs, options.redact)
    } catch (error) {
      await client.close().catch(() => undefined)
      throw error instanceof McpServerError ? error : httpStartError(httpClient, server, launch, error, options)
    }
  }

  let down: string | undefined
  let closing = false
  // A stdio server's process is gone: nothing sent from now on would be read, though the answers
  // it wrote before it exited are still read from its pipes.
  let exited = false
  if (stdio !== undefined) {
    const transport = stdio
    transport.onexit = () => {
      exited = true
    }
    exited = transport.exit !== undefined
  }
  const exitReason = (): string | undefined => (exited && stdio !== undefined ? oneLine(options.redact(describeExit(stdio))) : undefined)
  const session: McpSession = {
    tools,
    downReason: () => down ?? exitReason(),
    onDown: undefined,
    call: (tool, args, signal) => call(tool, args, signal),
    close: async () => {
      closing = true
      // A process that exited before the pool ended its session (a call after the exit retires
      // it) is said to have exited, so a call it died during names why.
      down ??= exitReason() ?? 'it was stopped'
      if (http !== undefined) {
        // Tells the server the session is over; a server that is gone or slow does not hold the close up.
        await Promise.race([http.terminateSession().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, options.killGraceMs).unref())])
      }
      await client.close().catch(() => undefined)
      await stdio?.close()
    }
  }
  const goDown = (reason: string): void => {
    if (down !== undefined) return
    down = oneLine(options.redact(reason))
    session.onDown?.(down)
  }
  // A stdio server's process ended: the SDK closes the client, and its pending calls fail.
  client.onclose = () => {
    if (!closing) goDown(stdio === undefined ? 'its connection closed' : describeExit(stdio))
  }

  const outcome = (text: string): ToolOutcome => failed(oneLine(options.redact(text)))
  const call = async (tool: string, args: ToolArguments, signal: AbortSignal): Promise<ToolOutcome | undefined> => {
    if (down !== undefined || exited) return undefined
    // Our own controller, so that the server is told why in `notifications/cancelled`.
    const cancel = new AbortController()
    const onAbort = () => cancel.abort(CANCEL_REASON)
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
    try {
      // No timeout of the SDK's own (60 s): the run's limits interrupt a call that takes too long.
      const result = await client.callTool({ name: tool, arguments: { ...args } }, undefined, { signal: cancel.signal, timeout: MAX_TIMER_MS })
      // A server of the 2024-10-07 protocol may answer `{toolResult}` instead of content.
      const normal: CallToolResult = Array.isArray(result['content'])
        ? (result as CallToolResult)
        : { content: [{ type: 'text', text: JSON.stringify(result['toolResult'] ?? null) }] }
      return mcpResultOutcome(server, tool, normal, options.redact)
    } catch (error) {
      if (cancel.signal.aborted) return outcome(`${mcpServerLabel(server)}: the call of tool ${quoteName(tool)} was cancelled`)
      // Refused before a byte was written (the process exited meanwhile, or the client had closed).
      if (error instanceof NotSentError || (error instanceof Error && error.message === 'Not connected')) return undefined
      const problem = launch.kind === 'http' && httpClient !== undefined ? httpProblem(httpClient, launch.url, error) : undefined
      if (problem !== undefined && (problem.reason === 'unreachable' || problem.status === 404)) {
        // Gone, or its session is: the next call starts a new session.
        goDown(problem.text)
        void client.close().catch(() => undefined)
      }
      // The call was written to a server that then stopped: it may have done its work before it
      // died, so the model is told so instead of reading a plain "not running" as "not done"
      // (docs/tools.md, "Failures"). An HTTP server that could not be reached never got it.
      const stoppedDuring = (): ToolOutcome =>
        outcome(`${mcpServerLabel(server)} stopped during the call of tool ${quoteName(tool)} (${down}): the call may have taken effect; it is not sent again`)
      if (down !== undefined) return problem === undefined ? stoppedDuring() : outcome(`${mcpServerLabel(server)} is not running (${down})`)
      if (problem !== undefined) return outcome(`${mcpServerLabel(server)}: tool ${quoteName(tool)} failed: ${problem.text}`)
      if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
        goDown('its connection closed')
        return stoppedDuring()
      }
      return outcome(`${mcpServerLabel(server)}: tool ${quoteName(tool)} failed: ${messageOf(error)}`)
    } finally {
      signal.removeEventListener('abort', onAbort)
    }
  }
  return session
}
