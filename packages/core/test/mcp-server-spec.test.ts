import { readdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { register } from 'node:module'
import type { AddressInfo } from 'node:net'
import { Effect, Either, ParseResult, Schema } from 'effect'
import { afterAll, describe, expect, it } from 'vitest'
import { makeMcpPool, type McpServerError, McpServers, type McpServerSpec, type McpStartOptions, mcpSecretNames } from '@agentvisor/core'

// See the hook file: without it the SDK's HTTP client cannot load in the test process.
register(new URL('./fixtures/mcp/without-source-condition.mjs', import.meta.url))

const decode = Schema.decodeUnknownEither(McpServers, { errors: 'all', onExcessProperty: 'error' })
/** The deepest issue, as the task file's error reports it (contract/task-contract.ts). */
const firstIssue = (input: unknown): string => {
  const decoded = decode(input)
  if (Either.isRight(decoded)) return 'decoded'
  const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
  const issue = issues.reduce((deepest, candidate) => (candidate.path.length > deepest.path.length ? candidate : deepest))
  return `${issue.path.join('.')}: ${issue.message}`
}

const TASK_SERVERS = {
  docs: { command: 'node', args: ['./docs-server.mjs'], env: { DOCS_TOKEN: { fromEnv: 'DOCS_TOKEN' } } },
  tickets: { url: 'http://127.0.0.1:9100/mcp', headers: { Authorization: { fromEnv: 'TICKETS_AUTH' } } }
}

describe('the mcpServers of a task file', () => {
  it('decode as written, stdio and Streamable HTTP, with fromEnv and plain values, excess fields refused', () => {
    const decoded = decode({ ...TASK_SERVERS, local: { command: 'node', env: { MODE: 'test' }, cwd: 'tools' } })
    expect(Either.getOrThrow(decoded)).toEqual({ ...TASK_SERVERS, local: { command: 'node', env: { MODE: 'test' }, cwd: 'tools' } })
  })

  it('refuse a server name that cannot head a tool name, naming it', () => {
    expect(firstIssue({ 'my docs': { command: 'node' } })).toBe('my docs: is not a valid server name (use letters, digits, _ and -)')
    expect(firstIssue({ ['d'.repeat(62)]: { command: 'node' } })).toMatch(/is longer than 61 characters/)
  })

  it('report a mistake once, against the kind of server meant: the one with command, or the one with url', () => {
    expect(firstIssue({ docs: { command: 'node', url: 'http://127.0.0.1:1/mcp' } })).toBe(
      'docs.url: is unexpected, expected: "command" | "args" | "env" | "cwd"'
    )
    expect(firstIssue({ docs: { url: 'http://127.0.0.1:1/mcp', env: { A: 'b' } } })).toBe('docs.env: is unexpected, expected: "url" | "headers"')
    expect(firstIssue({ docs: { url: 'ftp://127.0.0.1/mcp' } })).toBe('docs.url: must be an http:// or https:// URL')
    expect(firstIssue({ docs: { command: 'node', env: { TOKEN: { fromEnv: 'MY TOKEN' } } } })).toBe(
      'docs.env.TOKEN.fromEnv: must be an environment variable name (letters, digits and _)'
    )
    expect(firstIssue({ docs: { url: 'http://127.0.0.1:1/mcp', headers: { 'Bad Header': 'x' } } })).toBe('docs.headers.Bad Header: is not an HTTP header name')
  })

  it('name the variables their fromEnv values read, for the run to keep them from exec', () => {
    expect(mcpSecretNames(Either.getOrThrow(decode(TASK_SERVERS)))).toEqual(['DOCS_TOKEN', 'TICKETS_AUTH'])
    expect(mcpSecretNames(undefined)).toEqual([])
  })
})

const pool = makeMcpPool({ startTimeoutMs: 2_000, killGraceMs: 200 })
afterAll(() => pool.close())

const startError = async (server: string, spec: McpServerSpec, options: McpStartOptions = {}): Promise<McpServerError> => {
  const started = await Effect.runPromise(Effect.either(pool.start(server, spec, options)))
  if (Either.isRight(started)) throw new Error(`${server} started`)
  return started.left
}

/** The processes whose command line holds `marker` (Linux's /proc). */
const processesNamed = (marker: string): string[] =>
  readdirSync('/proc').filter((entry) => {
    if (!/^\d+$/.test(entry)) return false
    try {
      return readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)
    } catch {
      return false
    }
  })

/** A 127.0.0.1 port nothing listens on. */
const closedPort = async (): Promise<number> => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

describe('an MCP server that cannot start', () => {
  it('is a one-line error naming the server when its command does not exist', async () => {
    const error = await startError('docs', { command: 'agentvisor-no-such-command' })
    expect(error).toMatchObject({
      _tag: 'McpServerError',
      server: 'docs',
      reason: 'spawn',
      message: 'MCP server "docs": command "agentvisor-no-such-command" not found'
    })
  })

  it('is a one-line error with the last of its stderr when it exits at once', async () => {
    const error = await startError('broken', {
      command: process.execPath,
      args: ['-e', 'console.error("loading"); console.error("fatal: no config"); process.exit(3)']
    })
    expect(error.message).toBe('MCP server "broken": exited with code 3 before it answered; stderr: loading | fatal: no config')
  })

  it('is a one-line error when it does not answer initialize in time, and its process is ended', async () => {
    const impatient = makeMcpPool({ startTimeoutMs: 300, killGraceMs: 100 })
    const marker = `agentvisor-mute-${process.pid}`
    const started = await Effect.runPromise(
      Effect.either(impatient.start('mute', { command: process.execPath, args: ['-e', `setInterval(() => {}, 1000) // ${marker}`] }))
    )
    expect(started).toMatchObject({ left: { reason: 'timeout', message: 'MCP server "mute": did not answer within 300 ms' } })
    expect(processesNamed(marker)).toEqual([])
    await impatient.close()
  })

  it('is a one-line error naming the server and the variable when a fromEnv variable is not set', async () => {
    const error = await startError('docs', { command: 'node', env: { DOCS_TOKEN: { fromEnv: 'AGENTVISOR_TEST_UNSET' } } }, { env: {} })
    expect(error).toMatchObject({
      reason: 'config',
      message: 'MCP server "docs": the environment variable AGENTVISOR_TEST_UNSET is not set (env.DOCS_TOKEN reads it with fromEnv)'
    })
  })

  it('is a one-line error naming the server when its URL cannot be reached, and never shows a header value', async () => {
    const url = `http://127.0.0.1:${await closedPort()}/mcp`
    const error = await startError(
      'tickets',
      { url, headers: { Authorization: { fromEnv: 'TICKETS_AUTH' } } },
      { env: { TICKETS_AUTH: 'Bearer never-shown-5150' } }
    )
    expect(error).toMatchObject({ reason: 'unreachable', message: `MCP server "tickets": cannot reach ${url}: connection refused` })
    expect(JSON.stringify(error)).not.toContain('never-shown-5150')
  })

  it('is a one-line error when its folder does not exist', async () => {
    const error = await startError('docs', { command: 'node', cwd: '/nonexistent/agentvisor-folder' })
    expect(error.message).toBe('MCP server "docs": its cwd /nonexistent/agentvisor-folder does not exist')
  })
})
