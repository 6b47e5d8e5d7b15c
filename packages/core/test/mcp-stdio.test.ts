import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Effect, Either, Exit, Fiber } from 'effect'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  type CallableTool,
  makeMcpPool,
  makeSecretSet,
  makeToolCatalogue,
  type McpPool,
  type McpServerHandle,
  type McpServerSpec,
  openWorkspace,
  processGroupAlive,
  RunToolContext,
  runToolCall,
  type ToolCatalogue,
  toolActOf,
  type ToolOutcome
} from '@agentvisor/core'

const FIXTURES = fileURLToPath(new URL('./fixtures/mcp/', import.meta.url))
const TOKEN = 'docs-token-0b7e5c1f'

let base: string
let logFile: string
let pool: McpPool
let docs: McpServerHandle
let flaky: McpServerHandle
let catalogue: ToolCatalogue
let ctx: RunToolContext
const secrets = makeSecretSet()

/** The fixture server under `name`, its events logged to `log`. */
const testServer = (extra: Record<string, string> = {}): McpServerSpec => ({
  command: process.execPath,
  args: ['test-server.mjs'],
  cwd: FIXTURES,
  env: { DOCS_TOKEN: { fromEnv: 'DOCS_TOKEN' }, MCP_TEST_LOG: logFile, ...extra }
})

const env = (): NodeJS.ProcessEnv => ({ PATH: process.env['PATH'], DOCS_TOKEN: TOKEN, OPENAI_API_KEY: 'sk-provider-key-never-shared' })

const call = (name: string, args: unknown = {}): Promise<ToolOutcome> =>
  Effect.runPromise(runToolCall(catalogue, catalogue.get(name), { name, arguments: JSON.stringify(args) }, ctx))

const serverLog = (): string => readFileSync(logFile, 'utf8')

beforeAll(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-mcp-')))
  logFile = path.join(base, 'server.log')
  writeFileSync(logFile, '')
  ctx = new RunToolContext('run-1', 1, 0, 'call-0', await Effect.runPromise(openWorkspace(path.join(base, 'ws'))), {})
  pool = makeMcpPool({ killGraceMs: 300 })
  const handles = await Effect.runPromise(pool.startAll({ docs: testServer(), flaky: testServer() }, { env: env(), secrets }))
  ;[docs, flaky] = handles as [McpServerHandle, McpServerHandle]
  catalogue = Either.getOrThrow(makeToolCatalogue([...docs.tools, ...flaky.tools]))
})

afterAll(async () => {
  await pool.close()
  rmSync(base, { recursive: true, force: true })
})

describe('the tools of a stdio MCP server', () => {
  it('are in the catalogue as <server>__<tool>, from mcp:<server>, their effect class from their annotations', () => {
    expect(docs.tools.map((tool) => [tool.name, tool.source, tool.effect, tool.runsAs])).toEqual([
      ['docs__lookup', 'mcp:docs', 'read', 'call'],
      ['docs__put', 'mcp:docs', 'idempotent', 'call'],
      ['docs__send', 'mcp:docs', 'effect', 'call'],
      ['docs__weather', 'mcp:docs', 'read', 'call'],
      ['docs__broken', 'mcp:docs', 'effect', 'call'],
      ['docs__media', 'mcp:docs', 'effect', 'call'],
      ['docs__whoami', 'mcp:docs', 'effect', 'call'],
      ['docs__slow', 'mcp:docs', 'effect', 'call'],
      ['docs__crash', 'mcp:docs', 'effect', 'call'],
      ['docs__family', 'mcp:docs', 'effect', 'call']
    ])
  })

  it('offer the model the tool description (its title without one) and its input schema', () => {
    const lookup = catalogue.get('docs__lookup')!
    expect(lookup.spec.name).toBe('docs__lookup')
    expect(lookup.spec.description).toBe('Looks a word up')
    expect(lookup.spec.parameters).toMatchObject({ type: 'object', properties: { query: { type: 'string' } }, required: ['query'] })
    expect(catalogue.get('docs__put')!.spec.description).toBe('Store a value')
  })

  it('are judged by the policy as the tool act on their catalogue name', () => {
    expect(toolActOf(catalogue.get('docs__send'), '{"to":"ops"}')).toEqual({ act: 'tool', target: 'docs__send' })
  })

  it('are called with the arguments the model sent, and the text they return is the outcome', async () => {
    expect(await call('docs__lookup', { query: 'durable' })).toEqual({ ok: true, output: 'found durable' })
    expect(serverLog()).toContain('lookup "durable"')
  })

  it('refuse arguments their input schema rejects before the server sees them, each error as a JSON pointer and a message', async () => {
    const outcome = await call('docs__lookup', { limit: 1.5, extra: true })
    expect(outcome.ok).toBe(false)
    expect(outcome.output).toBe('Invalid arguments for docs__lookup: /query: is required; /limit: must be integer')
    const notObject = await call('docs__lookup', ['durable'])
    expect(notObject.output).toBe('Invalid arguments for docs__lookup: expected a JSON object, got an array')
    expect(serverLog()).not.toContain('lookup 1.5')
  })

  it('feed structured content back as JSON after the text', async () => {
    expect(await call('docs__weather', { city: 'Oslo' })).toEqual({ ok: true, output: 'Sunny in Oslo\n{"city":"Oslo","celsius":21}' })
  })

  it('describe other kinds of content in one line each', async () => {
    expect((await call('docs__media')).output).toBe(
      [
        'here you are',
        '[image image/png, 10 bytes]',
        '[resource link file:///docs/guide.md (guide), text/markdown]',
        '[resource file:///docs/note.txt, text/plain]',
        'the note'
      ].join('\n')
    )
  })

  it('answer ok: false with the server text when the tool reports an error', async () => {
    expect(await call('docs__broken')).toEqual({ ok: false, output: 'the ticket store is down' })
  })

  it('get fromEnv values and none of our own variables, and the values are redacted in outcomes and added to the run secrets', async () => {
    expect(await call('docs__whoami')).toEqual({ ok: true, output: 'token=[redacted] provider-key=none' })
    expect(secrets.redact(`Bearer ${TOKEN}`)).toBe('Bearer [redacted]')
  })

  it('are cancelled on the server when the call is interrupted, and the server goes on answering', async () => {
    const fiber = Effect.runFork(runToolCall(catalogue, catalogue.get('docs__slow'), { name: 'docs__slow', arguments: '{}' }, ctx))
    await vi.waitFor(() => expect(serverLog()).toContain('slow started'), { timeout: 60_000 })
    const exit = await Effect.runPromise(Fiber.interrupt(fiber))
    expect(Exit.isInterrupted(exit)).toBe(true)
    await vi.waitFor(() => expect(serverLog()).toContain('slow cancelled: cancelled by agentvisor: the run was cancelled or timed out'), { timeout: 60_000 })
    expect(await call('docs__lookup', { query: 'after' })).toEqual({ ok: true, output: 'found after' })
  })

  it('of a server that dies mid-call fail that call only; the other server answers, and the next call starts it again', async () => {
    const crashed = await call('flaky__crash')
    expect(crashed).toEqual({
      ok: false,
      output:
        'MCP server "flaky" stopped during the call of tool "crash" (exited with code 1; stderr: test server starting | fatal: crashing on purpose): the call may have taken effect; it is not sent again'
    })
    expect(await call('docs__lookup', { query: 'still' })).toEqual({ ok: true, output: 'found still' })
    expect(await call('flaky__lookup', { query: 'again' })).toEqual({ ok: true, output: 'found again' })
  })
})

describe('a pool of MCP servers', () => {
  it('answers a call with what the process that received it said: after a crash mid-call, the restarted server performs the next call and stays up', async () => {
    const dir = mkdtempSync(path.join(base, 'crash-once-'))
    const local = makeMcpPool({ killGraceMs: 300 })
    try {
      const handle = await Effect.runPromise(
        local.start('shop', { command: process.execPath, args: [path.join(FIXTURES, 'crash-once-server.mjs')], env: { MCP_TEST_DIR: dir } })
      )
      const charge = (id: string) => Effect.runPromise(handle.tools[0]!.run({ id }, ctx) as Effect.Effect<ToolOutcome>)
      expect(await charge('a')).toEqual({
        ok: false,
        output:
          'MCP server "shop" stopped during the call of tool "charge" (exited with code 3; stderr: fatal: crashing mid-call): the call may have taken effect; it is not sent again'
      })
      const second = await charge('b')
      const charged = () => readFileSync(path.join(dir, 'charged'), 'utf8').trim().split('\n')
      const [, pid] = charged()[0]!.split(' ')
      expect(second).toEqual({ ok: true, output: `charged b by ${pid}` })
      expect(processGroupAlive(Number(pid))).toBe(true)
      expect(await charge('c')).toEqual({ ok: true, output: `charged c by ${pid}` })
      expect(charged()).toEqual([`b ${pid}`, `c ${pid}`])
      expect(processGroupAlive(Number(pid))).toBe(true)
    } finally {
      await local.close()
    }
  })

  it('sends a call made after a server exited, while a helper it left still holds its pipes, to the server started again, and that answer is the outcome', async () => {
    const dir = mkdtempSync(path.join(base, 'crash-held-'))
    const local = makeMcpPool({ killGraceMs: 300 })
    try {
      const spec = { command: process.execPath, args: [path.join(FIXTURES, 'crash-once-server.mjs')], env: { MCP_TEST_DIR: dir, MCP_TEST_HOLD_PIPES: '1' } }
      const handle = await Effect.runPromise(local.start('shop', spec))
      const charge = (id: string) => Effect.runPromise(handle.tools[0]!.run({ id }, ctx) as Effect.Effect<ToolOutcome>)
      const first = charge('a')
      // The crashed process is gone (reaped), but its pipes stay open for the helper's 3 s.
      const crashedPid = await vi.waitFor(
        () => {
          const pid = Number(readFileSync(path.join(dir, 'crashed'), 'utf8'))
          expect(() => process.kill(pid, 0)).toThrow()
          return pid
        },
        { timeout: 60_000, interval: 10 }
      )
      const second = await charge('b')
      const charged = readFileSync(path.join(dir, 'charged'), 'utf8').trim().split('\n')
      expect(charged).toHaveLength(1)
      const [id, pid] = charged[0]!.split(' ')
      expect(id).toBe('b')
      expect(Number(pid)).not.toBe(crashedPid)
      expect(second).toEqual({ ok: true, output: `charged b by ${pid}` })
      expect(await first).toEqual({
        ok: false,
        output:
          'MCP server "shop" stopped during the call of tool "charge" (exited with code 3; stderr: fatal: crashing mid-call): the call may have taken effect; it is not sent again'
      })
      expect(processGroupAlive(Number(pid))).toBe(true)
    } finally {
      await local.close()
    }
  })

  it('starts a dead server again on each next call until it starts, failing the calls it cannot serve with why', async () => {
    const refuse = path.join(base, 'refuse-start')
    const phoenix = await Effect.runPromise(pool.start('phoenix', testServer({ MCP_TEST_REFUSE_IF: refuse }), { env: env() }))
    const run = (tool: string) =>
      Effect.runPromise(phoenix.tools.find((entry) => entry.name === `phoenix__${tool}`)!.run({ query: 'x' }, ctx) as Effect.Effect<ToolOutcome>)
    writeFileSync(refuse, '')
    expect((await run('crash')).ok).toBe(false)
    expect(await run('lookup')).toEqual({
      ok: false,
      output:
        'MCP server "phoenix" is not running (exited with code 1; stderr: test server starting | fatal: crashing on purpose); ' +
        'starting it again failed: exited with code 2 before it answered; stderr: fatal: refusing to start'
    })
    rmSync(refuse)
    expect(await run('lookup')).toEqual({ ok: true, output: 'found x' })
  })

  it('starts a server once for every run that names it with the same spec', async () => {
    const again = await Effect.runPromise(pool.start('docs', testServer(), { env: env() }))
    expect(again).toBe(docs)
  })

  it('lists every page of a server that pages its tools', async () => {
    const local = makeMcpPool()
    try {
      const paged = await Effect.runPromise(local.start('paged', { command: process.execPath, args: [path.join(FIXTURES, 'paged-server.mjs')] }))
      expect(paged.tools.map((tool) => tool.name)).toEqual(['paged__one', 'paged__two', 'paged__three', 'paged__four', 'paged__five'])
      expect(await Effect.runPromise((paged.tools[4] as CallableTool).run({}, ctx) as Effect.Effect<ToolOutcome>)).toEqual({ ok: true, output: 'called five' })
    } finally {
      await local.close()
    }
  })

  it('refuses a server with a tool whose catalogue name is not allowed, naming the server and the tool', async () => {
    const exit = await Effect.runPromiseExit(pool.start('odd', testServer({ MCP_TEST_EXTRA_TOOL: 'notes.search' }), { env: env() }))
    expect(exit).toMatchObject({
      _tag: 'Failure',
      cause: {
        error: {
          _tag: 'McpServerError',
          reason: 'tool-name',
          message:
            'MCP server "odd": its tool "notes.search" cannot be offered: its name "odd__notes.search" has characters a tool name may not have (only letters, digits, _ and -)'
        }
      }
    })
  })

  it('ends every server process and its helpers when closed, and answers later calls that the server is not running', async () => {
    const local = makeMcpPool({ killGraceMs: 300 })
    const handle = await Effect.runPromise(local.start('family', testServer(), { env: env() }))
    const family = handle.tools.find((tool) => tool.name === 'family__family')!
    const pids = JSON.parse((await Effect.runPromise(family.run({}, ctx) as Effect.Effect<ToolOutcome>)).output) as { server: number; helper: number }
    expect(processGroupAlive(pids.server)).toBe(true)
    await local.close()
    expect(processGroupAlive(pids.server)).toBe(false)
    expect(await Effect.runPromise(family.run({}, ctx) as Effect.Effect<ToolOutcome>)).toEqual({
      ok: false,
      output: 'MCP server "family" is not running (its pool was closed)'
    })
    expect(Either.isLeft(Effect.runSync(Effect.either(local.start('family', testServer(), { env: env() }))))).toBe(true)
  })
})
