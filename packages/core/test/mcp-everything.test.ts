import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect, Either } from 'effect'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  makeMcpPool,
  makeToolCatalogue,
  type McpPool,
  type McpServerHandle,
  openWorkspace,
  RunToolContext,
  runToolCall,
  type ToolCatalogue,
  type ToolOutcome
} from '@agentvisor/core'

// The reference MCP server of the MCP project, run from node_modules in its stdio mode.
const EVERYTHING = path.join(path.dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/package.json')), 'dist', 'index.js')

let base: string
let pool: McpPool
let everything: McpServerHandle
let catalogue: ToolCatalogue
let ctx: RunToolContext

const call = (name: string, args: unknown = {}): Promise<ToolOutcome> =>
  Effect.runPromise(runToolCall(catalogue, catalogue.get(name), { name, arguments: JSON.stringify(args) }, ctx))

beforeAll(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-mcp-everything-')))
  ctx = new RunToolContext('run-1', 1, 0, 'call-0', await Effect.runPromise(openWorkspace(base)), {})
  pool = makeMcpPool()
  everything = await Effect.runPromise(pool.start('everything', { command: process.execPath, args: [EVERYTHING, 'stdio'] }))
  catalogue = Either.getOrThrow(makeToolCatalogue(everything.tools))
})

afterAll(async () => {
  await pool.close()
  rmSync(base, { recursive: true, force: true })
})

describe('the MCP reference server (server-everything) over stdio', () => {
  it('has its tools in the catalogue, each effect class read from its annotations', () => {
    const effects = Object.fromEntries(everything.tools.map((tool) => [tool.name, tool.effect]))
    expect(effects).toMatchObject({
      // readOnlyHint
      everything__echo: 'read',
      'everything__get-sum': 'read',
      // idempotentHint without readOnlyHint
      'everything__gzip-file-as-resource': 'idempotent',
      // neither
      'everything__toggle-simulated-logging': 'effect'
    })
    expect(everything.tools.every((tool) => tool.source === 'mcp:everything' && /^[a-zA-Z0-9_-]{1,64}$/.test(tool.name))).toBe(true)
    expect(catalogue.get('everything__echo')!.spec).toMatchObject({
      description: 'Echoes back the input string',
      parameters: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] }
    })
  })

  it('leaves out, and says so, a tool that runs only as an MCP task', () => {
    expect(catalogue.get('everything__simulate-research-query')).toBeUndefined()
    expect(everything.leftOut).toEqual([{ tool: 'simulate-research-query', reason: 'it runs only as an MCP task, which agentvisor does not call' }])
  })

  it('answers echo and get-sum with their text', async () => {
    expect(await call('everything__echo', { message: 'durable' })).toEqual({ ok: true, output: 'Echo: durable' })
    expect(await call('everything__get-sum', { a: 2, b: 3 })).toEqual({ ok: true, output: 'The sum of 2 and 3 is 5.' })
  })

  it('refuses arguments that do not match the tool input schema before sending them', async () => {
    expect(await call('everything__echo', { message: 5 })).toEqual({ ok: false, output: 'Invalid arguments for everything__echo: /message: must be string' })
  })

  it('shows structured content once when the server also sends it as text', async () => {
    const outcome = await call('everything__get-structured-content', { location: 'Chicago' })
    expect(outcome.ok).toBe(true)
    expect(outcome.output.split('\n')).toHaveLength(1)
    expect(JSON.parse(outcome.output)).toHaveProperty('temperature')
  })

  it('describes an image in one line instead of its bytes', async () => {
    const outcome = await call('everything__get-tiny-image')
    expect(outcome.ok).toBe(true)
    expect(outcome.output).toMatch(/^\[image image\/png, \d+ bytes\]$/m)
    expect(outcome.output).not.toContain('iVBOR')
  })
})
