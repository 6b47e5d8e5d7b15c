import { existsSync } from 'node:fs'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ResultSchema, type Tool, ToolSchema } from '@modelcontextprotocol/sdk/types.js'
import { quoteName } from '../../contract/quote-name.js'
import { McpServerError } from './mcp-errors.js'
import { type HttpClientModule, httpStartError, serverError, stdioStartError } from './mcp-failure.js'
import type { ResolvedHttpServer, ResolvedStdioServer } from './mcp-server-spec.js'
import type { McpSessionOptions } from './mcp-session.js'
import { ChildProcessTransport } from './mcp-stdio-transport.js'

/**
 * The SDK's Streamable HTTP client, loaded when the first HTTP server starts: it pulls in
 * eventsource-parser, which a process with only stdio servers has no use for (and whose
 * `source` export condition, which this repository's test runner turns on, names TypeScript
 * that Node cannot load).
 */
const loadHttpClient = (): Promise<HttpClientModule> => import('@modelcontextprotocol/sdk/client/streamableHttp.js')

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

/** A server started, initialised and listed: its tools, and the transport it was started on. */
export interface StartedServer {
  readonly tools: ReadonlyArray<Tool>
  readonly stdio: ChildProcessTransport | undefined
  readonly http: StreamableHTTPClientTransport | undefined
  /** The HTTP client module an HTTP server was started with: its errors are read with it (mcp-failure.ts). */
  readonly httpClient: HttpClientModule | undefined
}

/**
 * Starts `launch` on `client` (spawns a stdio server, or opens an HTTP session), initialises it
 * and lists its tools, all within `startTimeoutMs`. Rejects with a one-line `McpServerError`
 * naming the server; whatever was started is ended first.
 */
export const startServer = async (
  server: string,
  launch: ResolvedStdioServer | ResolvedHttpServer,
  client: Client,
  options: McpSessionOptions
): Promise<StartedServer> => {
  const deadline = Date.now() + options.startTimeoutMs
  const remainingMs = () => Math.max(1, deadline - Date.now())
  if (launch.kind === 'stdio') {
    // Spawning in a missing folder fails as ENOENT, which would blame the command.
    if (!existsSync(launch.cwd)) throw serverError(server, 'spawn', `its cwd ${launch.cwd} does not exist`, options.redact)
    const stdio = new ChildProcessTransport(launch, options.inheritedEnv, options.killGraceMs)
    try {
      await client.connect(stdio, { timeout: remainingMs() })
      return { tools: await listAllTools(server, client, remainingMs, options.redact), stdio, http: undefined, httpClient: undefined }
    } catch (error) {
      // Before closing, which ends it too.
      const exitedByItself = stdio.exit !== undefined
      await stdio.close()
      throw error instanceof McpServerError ? error : stdioStartError(server, launch, stdio, exitedByItself, error, options)
    }
  }
  const httpClient = await loadHttpClient()
  const http = new httpClient.StreamableHTTPClientTransport(new URL(launch.url), { requestInit: { headers: { ...launch.headers } } })
  try {
    await client.connect(http, { timeout: remainingMs() })
    return { tools: await listAllTools(server, client, remainingMs, options.redact), stdio: undefined, http, httpClient }
  } catch (error) {
    await client.close().catch(() => undefined)
    throw error instanceof McpServerError ? error : httpStartError(httpClient, server, launch, error, options)
  }
}
