import { randomUUID } from 'node:crypto'
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { register } from 'node:module'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { Effect, Either, Exit, Fiber } from 'effect'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import {
  makeMcpPool,
  makeSecretSet,
  makeToolCatalogue,
  type McpPool,
  type McpServerHandle,
  type McpServerSpec,
  openWorkspace,
  RunToolContext,
  runToolCall,
  type ToolCatalogue,
  type ToolOutcome
} from '@agentvisor/core'

// See the hook file: without it the SDK's HTTP client cannot load in the test process.
register(new URL('./fixtures/mcp/without-source-condition.mjs', import.meta.url))

const AUTH = 'Bearer tickets-secret-4a9d21'

/** What reached the HTTP server: each request's method and Authorization header, and the tools' events. */
const requests: Array<{ method: string; auth: string }> = []
const events: string[] = []

const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] })

/** An SDK MCP server, one per session, as a Streamable HTTP server makes them. */
const ticketsServer = (): McpServer => {
  const server = new McpServer({ name: 'agentvisor-test-tickets', version: '1.0.0' })
  server.registerTool('open', { description: 'Opens a ticket', inputSchema: { title: z.string() }, annotations: { idempotentHint: true } }, async ({ title }) =>
    text(`opened ${title}`)
  )
  server.registerTool('whoami', { description: 'Shows the credentials it was sent', annotations: { readOnlyHint: true } }, async (extra) =>
    text(`auth=${String(extra.requestInfo?.headers['authorization'])}`)
  )
  server.registerTool('slow', { description: 'Waits until it is cancelled' }, async (extra) => {
    events.push('slow started')
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 30_000)
      extra.signal.addEventListener('abort', () => {
        events.push(`slow cancelled: ${String(extra.signal.reason)}`)
        clearTimeout(timer)
        resolve()
      })
    })
    return text('slow done')
  })
  return server
}

const sessions = new Map<string, StreamableHTTPServerTransport>()
const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
  const auth = req.headers.authorization ?? ''
  requests.push({ method: req.method ?? '', auth })
  if (auth !== AUTH) {
    // Servers do echo what they were sent: none of it may reach an error message.
    res.writeHead(401, { 'content-type': 'text/plain' }).end(`invalid credentials: ${auth}`)
    return
  }
  const id = req.headers['mcp-session-id']
  let transport = typeof id === 'string' ? sessions.get(id) : undefined
  if (transport === undefined) {
    const created = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => void sessions.set(sid, created)
    })
    await ticketsServer().connect(created)
    transport = created
  }
  await transport.handleRequest(req, res)
}
const httpServer = createServer((req, res) => void handle(req, res))

let base: string
let port: number
let url: string
let pool: McpPool
let tickets: McpServerHandle
let catalogue: ToolCatalogue
let ctx: RunToolContext
const secrets = makeSecretSet()

const spec = (): McpServerSpec => ({ url, headers: { Authorization: { fromEnv: 'TICKETS_AUTH' }, 'X-Client': 'agentvisor-tests' } })

const call = (name: string, args: unknown = {}): Promise<ToolOutcome> =>
  Effect.runPromise(runToolCall(catalogue, catalogue.get(name), { name, arguments: JSON.stringify(args) }, ctx))

const listen = (at: number) => new Promise<void>((resolve) => httpServer.listen(at, '127.0.0.1', resolve))

beforeAll(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-mcp-http-')))
  ctx = new RunToolContext('run-1', 1, 0, 'call-0', await Effect.runPromise(openWorkspace(base)), {})
  await listen(0)
  port = (httpServer.address() as AddressInfo).port
  url = `http://127.0.0.1:${port}/mcp`
  pool = makeMcpPool()
  tickets = await Effect.runPromise(pool.start('tickets', spec(), { env: { TICKETS_AUTH: AUTH }, secrets }))
  catalogue = Either.getOrThrow(makeToolCatalogue(tickets.tools))
})

afterAll(async () => {
  await pool.close()
  httpServer.closeAllConnections()
  await new Promise((resolve) => httpServer.close(resolve))
  rmSync(base, { recursive: true, force: true })
})

describe('an MCP server over Streamable HTTP', () => {
  it('has its tools listed with their names, source and effect classes', () => {
    expect(tickets.tools.map((tool) => [tool.name, tool.source, tool.effect])).toEqual([
      ['tickets__open', 'mcp:tickets', 'idempotent'],
      ['tickets__whoami', 'mcp:tickets', 'read'],
      ['tickets__slow', 'mcp:tickets', 'effect']
    ])
  })

  it('is sent the fromEnv header on every request, and the value shows in no outcome', async () => {
    expect(await call('tickets__open', { title: 'printer jam' })).toEqual({ ok: true, output: 'opened printer jam' })
    expect(requests.length).toBeGreaterThan(0)
    expect(requests.every((request) => request.auth === AUTH)).toBe(true)
    expect(await call('tickets__whoami')).toEqual({ ok: true, output: 'auth=[redacted]' })
    expect(secrets.redact(`sent ${AUTH}`)).toBe('sent [redacted]')
  })

  it('is told a call was cancelled when the call is interrupted', async () => {
    const fiber = Effect.runFork(runToolCall(catalogue, catalogue.get('tickets__slow'), { name: 'tickets__slow', arguments: '{}' }, ctx))
    await vi.waitFor(() => expect(events).toContain('slow started'), { timeout: 60_000 })
    expect(Exit.isInterrupted(await Effect.runPromise(Fiber.interrupt(fiber)))).toBe(true)
    await vi.waitFor(() => expect(events).toContain('slow cancelled: cancelled by agentvisor: the run was cancelled or timed out'), { timeout: 60_000 })
  })

  it('that refuses the credentials fails to start with a one-line error that names the server, not the value', async () => {
    const local = makeMcpPool()
    try {
      const exit = await Effect.runPromiseExit(local.start('tickets', spec(), { env: { TICKETS_AUTH: 'Bearer wrong-credentials-77' } }))
      expect(exit).toMatchObject({
        _tag: 'Failure',
        cause: { error: { reason: 'refused', message: `MCP server "tickets": ${url} refused the connection (HTTP 401): check its headers` } }
      })
      expect(JSON.stringify(exit)).not.toContain('wrong-credentials-77')
    } finally {
      await local.close()
    }
  })

  it('that stops answering fails the calls made meanwhile, and is reached again by the next call once it is back', async () => {
    httpServer.close()
    httpServer.closeAllConnections()
    expect(await call('tickets__open', { title: 'lost' })).toEqual({
      ok: false,
      output: `MCP server "tickets" is not running (cannot reach ${url}: connection refused)`
    })
    await listen(port)
    expect(await call('tickets__open', { title: 'found' })).toEqual({ ok: true, output: 'opened found' })
  })

  it('has its session ended when the pool is closed', async () => {
    const local = makeMcpPool()
    await Effect.runPromise(local.start('tickets', spec(), { env: { TICKETS_AUTH: AUTH } }))
    const before = requests.length
    await local.close()
    expect(requests.slice(before).map((request) => request.method)).toContain('DELETE')
  })
})
