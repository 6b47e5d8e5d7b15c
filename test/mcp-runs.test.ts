import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import { type MockLlm, spawnTethered } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, taskInTempDir, tempDir, waitFor } from './support/cli.js'
import { processesMatching } from './support/processes.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { storedTrace } from './support/stored-trace.js'

// Runs whose agents call the tools of MCP servers (docs/tools.md, "MCP servers"): a server built
// with the SDK in the tests (packages/core/test/fixtures/mcp/test-server.mjs), spawned by the
// real CLI over stdio, and the third-party server-everything.
const FIXTURES = path.join(import.meta.dirname, '..', 'packages', 'core', 'test', 'fixtures', 'mcp')
const SERVER = path.join(FIXTURES, 'test-server.mjs')
const EVERYTHING = path.join(import.meta.dirname, '..', 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js')

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const call = (name: string, args: Record<string, unknown> = {}) => ({ name, arguments: args })
interface Body {
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content?: string }>
  readonly tools?: ReadonlyArray<{ readonly function: { readonly name: string } }>
}
const bodies = (): Body[] => mock!.requests.map((r) => r.body as Body)
const toolMessages = (body: Body | undefined): string[] => (body?.messages ?? []).filter((m) => m.role === 'tool').map((m) => m.content ?? '')
const logOf = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [])

/** A task whose agent may call the docs server's tools; the server logs what reaches it to `log`. */
const mcpTask = (baseUrl: string, log: string, extra: Record<string, unknown> = {}) => ({
  goal: 'Use the docs',
  workspace: 'ws',
  providers: [{ name: 'p', kind: 'openai', baseUrl, model: 'm' }],
  tools: ['docs__*'],
  mcpServers: { docs: { command: process.execPath, args: [SERVER], env: { MCP_TEST_LOG: log, DOCS_TOKEN: { fromEnv: 'AV_TEST_DOCS_TOKEN' } } } },
  policy: { layers: [{ name: 'team', allow: { tool: ['docs__*'] } }] },
  approval: 'defer',
  ...extra
})

/** `run` refuses the task with exit 2 and one line matching `message`, and no run row exists. */
const expectRefusedBeforeAnyRun = async (task: string, db: string, message: RegExp): Promise<void> => {
  const result = await runCli(['run', task, '--json', '--db', db])
  expect(result.code, result.stderr).toBe(2)
  expect(result.stderr.trim().split('\n')).toHaveLength(1)
  expect(result.stderr).not.toContain('    at ')
  expect(lastJson<{ error: { message: string } }>(result).error.message).toMatch(message)
  expect(lastJson(await runCli(['runs', '--json', '--db', db]))).toEqual([])
}

describe('MCP servers in a run', () => {
  it('offers the server tools, feeds back text, structured and error results, and never stores a fromEnv secret', async () => {
    const token = `docs-token-${Math.random().toString(36).slice(2)}`
    mock = await startMock.scenarios({
      models: {
        m: [
          { toolCalls: [call('docs__lookup', { query: 'retries' }), call('docs__weather', { city: 'Oslo' }), call('docs__broken')] },
          { toolCalls: [call('docs__whoami')] },
          { text: 'done' }
        ]
      }
    })
    const dir = tempDir()
    const log = path.join(dir, 'server.log')
    const { db, task } = taskInTempDir(mcpTask(mock.url, log))
    const result = await runCli(['run', task, '--json', '--db', db], { env: { AV_TEST_DOCS_TOKEN: token } })
    expect(result.code, result.stderr).toBe(0)
    const [first, second, third] = bodies()
    expect(first!.tools!.map((t) => t.function.name)).toEqual([
      'docs__lookup',
      'docs__put',
      'docs__send',
      'docs__weather',
      'docs__broken',
      'docs__media',
      'docs__whoami',
      'docs__slow',
      'docs__crash',
      'docs__family'
    ])
    const [lookup, weather, broken] = toolMessages(second)
    expect(lookup).toBe('found retries')
    expect(weather).toContain('Sunny in Oslo')
    expect(weather).toContain('{"city":"Oslo","celsius":21}')
    expect(broken).toContain('the ticket store is down')
    // The server got the secret; the model, the store and the trace only ever see it redacted.
    expect(toolMessages(third).at(-1)).toMatch(/^token=\[redacted\] provider-key=none/)
    expect(logOf(log)).toContain('lookup "retries"')
    const runId = lastJson<{ runId: string }>(result).runId
    const shown = await runCli(['show', runId, '--json', '--db', db])
    const trace = lastJson<{ steps: Array<{ toolCalls: Array<Record<string, unknown>> }> }>(shown)
    expect(trace.steps[0]!.toolCalls.map(({ name, source, effect }) => ({ name, source, effect }))).toEqual([
      { name: 'docs__lookup', source: 'mcp:docs', effect: 'read' },
      { name: 'docs__weather', source: 'mcp:docs', effect: 'read' },
      { name: 'docs__broken', source: 'mcp:docs', effect: 'effect' }
    ])
    for (const text of [readFileSync(db).toString('latin1'), shown.stdout, result.stdout, result.stderr]) expect(text).not.toContain(token)
    // The server ended with the run's process.
    expect(processesMatching(SERVER)).toEqual([])
  })

  it('refuses a call the policy denies before any request reaches the server', async () => {
    mock = await startMock([{ toolCalls: [call('docs__send', { to: 'everyone' })] }, { text: 'done' }])
    const dir = tempDir()
    const log = path.join(dir, 'server.log')
    const task = mcpTask(mock.url, log, { policy: { layers: [{ name: 'team', allow: { tool: ['docs__*'] }, deny: { tool: ['docs__send'] } }] } })
    const { db, task: file } = taskInTempDir(task)
    const result = await runCli(['run', file, '--json', '--db', db], { env: { AV_TEST_DOCS_TOKEN: 'x-token' } })
    expect(result.code, result.stderr).toBe(0)
    expect(toolMessages(bodies()[1])).toEqual(['Refused by policy: tool docs__send refused by rule "docs__send" in layer "team".'])
    expect(logOf(log).filter((line) => line.startsWith('send'))).toEqual([])
    expect(logOf(log).some((line) => line.startsWith('started'))).toBe(true)
  })

  it('sends the MCP cancellation when the run is cancelled mid-call, and ends cancelled', async () => {
    mock = await startMock([{ toolCalls: [call('docs__slow')] }, { text: 'done' }])
    const dir = tempDir()
    const log = path.join(dir, 'server.log')
    const { db, task } = taskInTempDir(mcpTask(mock.url, log))
    let runId: string | undefined
    const running = runCli(['run', task, '--json', '--db', db], {
      env: { AV_TEST_DOCS_TOKEN: 'x-token' },
      onStderr: (text) => (runId ??= /run (\S+) started/.exec(text)?.[1])
    })
    await waitFor(() => (logOf(log).includes('slow started') ? true : undefined), 'the slow call under way')
    expect((await runCli(['cancel', runId!, '--db', db])).code).toBe(0)
    const result = await running
    expect(lastJson(result)).toMatchObject({ status: 'cancelled' })
    expect(logOf(log).find((line) => line.startsWith('slow cancelled'))).toBeDefined()
    expect(processesMatching(SERVER)).toEqual([])
  })

  it('fails only the call of a server that exits mid-run, and starts it again for the next call', async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [call('docs__crash')] }, { toolCalls: [call('docs__lookup', { query: 'again' })] }, { text: 'done' }] }
    })
    const dir = tempDir()
    const { db, task } = taskInTempDir(mcpTask(mock.url, path.join(dir, 'server.log')))
    const result = await runCli(['run', task, '--json', '--db', db], { env: { AV_TEST_DOCS_TOKEN: 'x-token' } })
    expect(result.code, result.stderr).toBe(0)
    expect(toolMessages(bodies()[1])[0]).toMatch(/MCP server "docs"/)
    expect(toolMessages(bodies()[2]).at(-1)).toBe('found again')
  })

  it('feeds the model and stores the answer of the restarted server that performed a call, after a crash mid-call, and keeps it up', async () => {
    mock = await startMock.scenarios({
      models: {
        m: [
          { toolCalls: [call('shop__charge', { id: 'a' })] },
          { toolCalls: [call('shop__charge', { id: 'b' })] },
          { toolCalls: [call('shop__charge', { id: 'c' })] },
          { text: 'done' }
        ]
      }
    })
    const dir = tempDir()
    const { db, task } = taskInTempDir({
      ...mcpTask(mock.url, '/dev/null'),
      tools: ['shop__*'],
      mcpServers: { shop: { command: process.execPath, args: [path.join(FIXTURES, 'crash-once-server.mjs')], env: { MCP_TEST_DIR: dir } } },
      policy: { layers: [{ name: 'team', allow: { tool: ['shop__*'] } }] }
    })
    const result = await runCli(['run', task, '--json', '--db', db])
    expect(result.code, result.stderr).toBe(0)
    const charged = logOf(path.join(dir, 'charged'))
    const pid = charged[0]!.split(' ')[1]
    // The second process performed b and c: it was not killed after answering b.
    expect(charged).toEqual([`b ${pid}`, `c ${pid}`])
    expect(toolMessages(bodies()[1])).toEqual([
      'MCP server "shop" stopped during the call of tool "charge" (exited with code 3; stderr: fatal: crashing mid-call): the call may have taken effect; it is not sent again'
    ])
    expect(toolMessages(bodies()[2]).at(-1)).toBe(`charged b by ${pid}`)
    expect(toolMessages(bodies()[3]).at(-1)).toBe(`charged c by ${pid}`)
    const shown = await storedTrace<{ steps: Array<{ results: string[] }> }>(db, lastJson<{ runId: string }>(result).runId)
    expect(shown.steps.slice(0, 3).map((step) => step.results)).toEqual([
      [
        'MCP server "shop" stopped during the call of tool "charge" (exited with code 3; stderr: fatal: crashing mid-call): the call may have taken effect; it is not sent again'
      ],
      [`charged b by ${pid}`],
      [`charged c by ${pid}`]
    ])
  })

  it('stops a run whose MCP server lists a tool past the schema bounds or without a name: exit 2, one line naming server and tool, no run', async () => {
    const hostile = (kind: string) => ({ evil: { command: process.execPath, args: [path.join(FIXTURES, 'hostile-server.mjs')], env: { MCP_HOSTILE: kind } } })
    for (const [kind, message] of [
      ['deep', /^MCP server "evil": its tool "deep" cannot be offered: its inputSchema nests deeper than 64 levels \(at \/properties\/next/],
      [
        'huge-enum',
        /^MCP server "evil": its tool "pick" cannot be offered: its inputSchema has a list of 200000 items at \/properties\/v\/enum, more than 1000$/
      ],
      ['not-object', /^MCP server "evil": its tool "scalar" cannot be offered: inputSchema.type: Invalid input: expected "object"$/],
      ['empty-name', /^MCP server "evil": it lists a tool with an empty name, which MCP does not allow$/]
    ] as const) {
      const { db, task } = taskInTempDir({ ...mcpTask('http://127.0.0.1:9/v1', '/dev/null'), tools: ['evil__*'], mcpServers: hostile(kind) })
      await expectRefusedBeforeAnyRun(task, db, message)
    }
  })

  it.each([
    ['a command that does not exist', { docs: { command: 'agentvisor-no-such-mcp-server' } }, /^mcpServers\.docs: |MCP server "docs"/],
    ['an unreachable URL', { docs: { url: 'http://127.0.0.1:9/mcp' } }, /MCP server "docs"/]
  ])('stops a run whose MCP server is %s: exit 2, one line, no run', async (_what, servers, message) => {
    const { db, task } = taskInTempDir({ ...mcpTask('http://127.0.0.1:9/v1', '/dev/null'), mcpServers: servers })
    await expectRefusedBeforeAnyRun(task, db, message)
  })

  it("calls server-everything's echo over stdio, its tools' annotations giving their effect classes", async () => {
    mock = await startMock([{ toolCalls: [call('everything__echo', { message: 'hello mcp' })] }, { text: 'done' }])
    const { db, task } = taskInTempDir({
      goal: 'Echo',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      tools: ['everything__*'],
      mcpServers: { everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] } },
      approval: 'auto'
    })
    const result = await runCli(['run', task, '--json', '--db', db])
    expect(result.code, result.stderr).toBe(0)
    expect(bodies()[0]!.tools!.map((t) => t.function.name)).toContain('everything__echo')
    expect(toolMessages(bodies()[1])[0]).toContain('hello mcp')
    const trace = await storedTrace<{ steps: Array<{ toolCalls: Array<Record<string, unknown>> }> }>(db, lastJson<{ runId: string }>(result).runId)
    expect(trace.steps[0]!.toolCalls[0]).toMatchObject({ name: 'everything__echo', source: 'mcp:everything', effect: 'read' })
  })
})

describe('a resumed run whose tools changed', () => {
  it('is told which tools are gone and which are new', async () => {
    mock = await startMock([{ toolCalls: [call('docs__send', { to: 'ops' })] }, { text: 'done' }])
    const dir = tempDir()
    const task = mcpTask(mock.url, path.join(dir, 'server.log'), {
      // The server's extra tool is named by the environment of the process that starts it.
      mcpServers: { docs: { command: process.execPath, args: [SERVER], env: { MCP_TEST_EXTRA_TOOL: { fromEnv: 'AV_TEST_EXTRA' } } } },
      policy: { layers: [{ name: 'team', allow: { tool: ['docs__lookup'] } }] }
    })
    const { db, task: file } = taskInTempDir(task)
    const paused = await runCli(['run', file, '--json', '--db', db], { env: { AV_TEST_EXTRA: 'extra_a' } })
    expect(paused.code, paused.stderr).toBe(3)
    const runId = lastJson<{ runId: string }>(paused).runId
    expect((await runCli(['approve', runId, '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db], { env: { AV_TEST_EXTRA: 'extra_b' } })
    expect(resumed.code, resumed.stderr).toBe(0)
    const last = bodies().at(-1)!
    expect(last.messages.map((m) => m.content)).toContain(
      'Note: the tools you may call changed while this run was stopped (no longer available: docs__extra_a; new: docs__extra_b).'
    )
    expect(last.tools!.map((t) => t.function.name)).toContain('docs__extra_b')
  })
})

describe('an MCP server over Streamable HTTP in a run', () => {
  it('lists and calls its tools with the fromEnv header, feeds back text and structured results, and stores no secret', async () => {
    const auth = `Bearer tickets-${Math.random().toString(36).slice(2)}`
    const server = spawnTethered(process.execPath, [path.join(import.meta.dirname, 'fixtures', 'mcp', 'http-tickets-server.mjs')], {
      env: { ...process.env, TICKETS_AUTH: auth },
      stdio: ['ignore', 'pipe', 'inherit']
    })
    try {
      const port = await new Promise<string>((resolve, reject) => {
        server.stdout!.on('data', (d: Buffer) => {
          const found = /listening (\d+)/.exec(d.toString())?.[1]
          if (found !== undefined) resolve(found)
        })
        server.once('exit', () => reject(new Error('the tickets server exited')))
      })
      mock = await startMock([{ toolCalls: [call('tickets__open', { title: 'Login fails' }), call('tickets__whoami')] }, { text: 'done' }])
      const { db, task } = taskInTempDir({
        goal: 'Open a ticket',
        workspace: 'ws',
        providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
        tools: ['tickets__*'],
        mcpServers: { tickets: { url: `http://127.0.0.1:${port}/mcp`, headers: { Authorization: { fromEnv: 'AV_TEST_TICKETS_AUTH' } } } },
        approval: 'auto'
      })
      const result = await runCli(['run', task, '--json', '--db', db], { env: { AV_TEST_TICKETS_AUTH: auth } })
      expect(result.code, result.stderr).toBe(0)
      expect(bodies()[0]!.tools!.map((t) => t.function.name)).toEqual(['tickets__open', 'tickets__whoami'])
      const [opened, whoami] = toolMessages(bodies()[1])
      expect(opened).toContain('opened Login fails')
      expect(opened).toContain('{"id":"T-7","title":"Login fails"}')
      expect(whoami).toBe('auth=[redacted]')
      const shown = await runCli(['show', lastJson<{ runId: string }>(result).runId, '--json', '--db', db])
      const trace = lastJson<{ steps: Array<{ toolCalls: Array<Record<string, unknown>> }> }>(shown)
      expect(trace.steps[0]!.toolCalls.map(({ source, effect }) => ({ source, effect }))).toEqual([
        { source: 'mcp:tickets', effect: 'idempotent' },
        { source: 'mcp:tickets', effect: 'read' }
      ])
      const secret = auth.slice('Bearer '.length)
      for (const text of [readFileSync(db).toString('latin1'), shown.stdout, result.stdout, result.stderr]) expect(text).not.toContain(secret)
    } finally {
      server.kill('SIGTERM')
    }
  })
})
