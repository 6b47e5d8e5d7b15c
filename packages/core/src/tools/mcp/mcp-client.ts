import { quoteName } from '../../contract/quote-name.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { type CallToolResult, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js'
import { MAX_TIMER_MS } from '../../provider/scripted-step.js'
import type { ToolArguments } from '../tool-definition.js'
import { failed, type ToolOutcome } from '../tool-outcome.js'
import { mcpServerLabel } from './mcp-errors.js'
import { describeExit, httpProblem, messageOf, oneLine } from './mcp-failure.js'
import { mcpOutputSchemaValidator } from './mcp-json-schema.js'
import { mcpResultOutcome } from './mcp-outcome.js'
import type { ResolvedHttpServer, ResolvedStdioServer } from './mcp-server-spec.js'
import type { McpSession, McpSessionOptions } from './mcp-session.js'
import { type StartedServer, startServer } from './mcp-start.js'
import { NotSentError } from './mcp-stdio-transport.js'

/*
 * One connection to one MCP server through the SDK's client (docs/tools.md, "MCP servers"):
 * started and its tools listed (mcp-start.ts), called, watched for its end and closed. It knows
 * nothing of restarts or of other servers: the pool does.
 */

/** How agentvisor introduces itself to a server. */
const CLIENT_INFO = { name: 'agentvisor', version: '0.1.0' }

/** What the server is told when a call is cancelled (the SDK sends it in `notifications/cancelled`). */
const CANCEL_REASON = 'cancelled by agentvisor: the run was cancelled or timed out'

/**
 * Starts `launch` (spawns a stdio server, or opens an HTTP session), initialises it and lists
 * its tools, all within `startTimeoutMs`. Rejects with a one-line `McpServerError` naming the
 * server; whatever was started is ended first.
 */
export const openMcpSession = async (server: string, launch: ResolvedStdioServer | ResolvedHttpServer, options: McpSessionOptions): Promise<McpSession> => {
  const client = new Client(CLIENT_INFO, { capabilities: {}, jsonSchemaValidator: mcpOutputSchemaValidator })
  // Errors the SDK reports outside any request (a stray line on stdout, a notification stream
  // that failed): the requests they affect fail on their own.
  client.onerror = () => undefined
  const started = await startServer(server, launch, client, options)
  const session: McpSession = {
    tools: started.tools,
    downReason: () => live.down ?? exitReason(live),
    onDown: undefined,
    call: (tool, args, signal) => callTool(live, tool, args, signal),
    close: () => closeSession(live)
  }
  const live: Live = { server, launch, client, started, options, session, down: undefined, closing: false, exited: false }
  const stdio = started.stdio
  if (stdio !== undefined) {
    stdio.onexit = () => {
      live.exited = true
    }
    live.exited = stdio.exit !== undefined
  }
  // A stdio server's process ended: the SDK closes the client, and its pending calls fail.
  client.onclose = () => {
    if (!live.closing) goDown(live, stdio === undefined ? 'its connection closed' : describeExit(stdio))
  }
  return session
}

/** A started session and where it stands: up, closing, or down and why. */
interface Live {
  readonly server: string
  readonly launch: ResolvedStdioServer | ResolvedHttpServer
  readonly client: Client
  readonly started: StartedServer
  readonly options: McpSessionOptions
  readonly session: McpSession
  /** Why it went down, redacted; undefined while it is up. */
  down: string | undefined
  closing: boolean
  /**
   * A stdio server's process is gone: nothing sent from now on would be read, though the answers
   * it wrote before it exited are still read from its pipes.
   */
  exited: boolean
}

const exitReason = (live: Live): string | undefined => {
  const stdio = live.started.stdio
  return live.exited && stdio !== undefined ? oneLine(live.options.redact(describeExit(stdio))) : undefined
}

/** The session went down by itself: said once, to the pool (`onDown`). */
const goDown = (live: Live, reason: string): void => {
  if (live.down !== undefined) return
  live.down = oneLine(live.options.redact(reason))
  live.session.onDown?.(live.down)
}

const closeSession = async (live: Live): Promise<void> => {
  const { http, stdio } = live.started
  live.closing = true
  // A process that exited before the pool ended its session (a call after the exit retires
  // it) is said to have exited, so a call it died during names why.
  live.down ??= exitReason(live) ?? 'it was stopped'
  if (http !== undefined) {
    // Tells the server the session is over; a server that is gone or slow does not hold the close up.
    await Promise.race([http.terminateSession().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, live.options.killGraceMs).unref())])
  }
  await live.client.close().catch(() => undefined)
  await stdio?.close()
}

/** One `tools/call` (`McpSession.call`). */
const callTool = async (live: Live, tool: string, args: ToolArguments, signal: AbortSignal): Promise<ToolOutcome | undefined> => {
  const { server, launch, client, options } = live
  const { httpClient } = live.started
  if (live.down !== undefined || live.exited) return undefined
  const outcome = (text: string): ToolOutcome => failed(oneLine(options.redact(text)))
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
      goDown(live, problem.text)
      void client.close().catch(() => undefined)
    }
    // The call was written to a server that then stopped: it may have done its work before it
    // died, so the model is told so instead of reading a plain "not running" as "not done"
    // (docs/tools.md, "Failures"). An HTTP server that could not be reached never got it.
    const stoppedDuring = (): ToolOutcome =>
      outcome(
        `${mcpServerLabel(server)} stopped during the call of tool ${quoteName(tool)} (${live.down}): the call may have taken effect; it is not sent again`
      )
    if (live.down !== undefined) return problem === undefined ? stoppedDuring() : outcome(`${mcpServerLabel(server)} is not running (${live.down})`)
    if (problem !== undefined) return outcome(`${mcpServerLabel(server)}: tool ${quoteName(tool)} failed: ${problem.text}`)
    if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
      goDown(live, 'its connection closed')
      return stoppedDuring()
    }
    return outcome(`${mcpServerLabel(server)}: tool ${quoteName(tool)} failed: ${messageOf(error)}`)
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
}
