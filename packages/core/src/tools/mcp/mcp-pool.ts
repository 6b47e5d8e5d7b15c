import { Effect, Either } from 'effect'
import { makeSecretSet, type SecretSet } from '../../secrets/secret-set.js'
import type { CallableTool, ToolArguments } from '../tool-definition.js'
import { failed, type ToolOutcome } from '../tool-outcome.js'
import { openMcpSession } from './mcp-client.js'
import type { McpSession, McpSessionOptions } from './mcp-session.js'
import { McpServerError, mcpServerLabel } from './mcp-errors.js'
import { type McpServerSpec, type McpServers, mcpServerKey, type ResolvedMcpServer, resolveMcpServer } from './mcp-server-spec.js'
import { mcpToolDefinitions, type McpToolLeftOut, type McpToolSet } from './mcp-tools.js'

/*
 * The MCP servers of a process (docs/tools.md, "MCP servers"): each started once, on the first
 * run that names it, and shared by every run after; restarted by the next call after it dies;
 * all ended when the process closes the pool.
 */

/** How a pool starts and ends its servers. */
export interface McpPoolOptions {
  /** How long a server has to start, answer `initialize` and list its tools; 30 s when omitted. */
  readonly startTimeoutMs?: number | undefined
  /** How long a stdio server gets after its stdin closes, then after SIGTERM, before SIGKILL; 2 s when omitted. */
  readonly killGraceMs?: number | undefined
}

/** What a run starting a server brings. */
export interface McpStartOptions {
  /** Where `fromEnv` values are read, and the few variables a stdio server inherits; `process.env` when omitted. */
  readonly env?: NodeJS.ProcessEnv | undefined
  /** The folder a stdio server's `cwd` is relative to (the task file's); `process.cwd()` when omitted. */
  readonly cwd?: string | undefined
  /** Every `fromEnv` value the server uses is added here, so that the run redacts it everywhere. */
  readonly secrets?: SecretSet | undefined
}

/** A started server, as a run sees it. */
export interface McpServerHandle {
  readonly server: string
  /** Its tools as catalogue entries (`<server>__<tool>`), in the order it listed them. */
  readonly tools: ReadonlyArray<CallableTool<ToolArguments>>
  /** The tools it lists that are not offered (those that run only as MCP tasks), for the operator to be told. */
  readonly leftOut: ReadonlyArray<McpToolLeftOut>
}

/**
 * The MCP servers of a process.
 *
 * @example
 * const pool = makeMcpPool()
 * // At a run's start: its servers' tools join the built-in ones.
 * const handles = yield* pool.startAll(task.mcpServers, { cwd: taskDir, secrets })
 * const catalogue = makeToolCatalogue([...BUILTIN_TOOLS, ...handles.flatMap((handle) => handle.tools)])
 * // At the process's end:
 * await pool.close()
 */
export interface McpPool {
  /**
   * The server `server` of `spec`, started if this pool has not started it yet (same name, same
   * spec, same folder: `fromEnv` names, never values, tell servers apart); its tools are listed
   * by the time the Effect succeeds. Fails with a one-line `McpServerError` naming the server
   * when it cannot be started; a later `start` tries again.
   */
  readonly start: (server: string, spec: McpServerSpec, options?: McpStartOptions) => Effect.Effect<McpServerHandle, McpServerError>
  /** `start` for every server of a task's `mcpServers`, all at once, in the record's order; none for `undefined`. */
  readonly startAll: (servers: McpServers | undefined, options?: McpStartOptions) => Effect.Effect<ReadonlyArray<McpServerHandle>, McpServerError>
  /**
   * Ends every server: each stdio server's whole process group, each HTTP session. Calls after
   * it answer that the server is not running, and `start` fails. Safe to call twice.
   */
  readonly close: () => Promise<void>
}

const DEFAULT_START_TIMEOUT_MS = 30_000
const DEFAULT_KILL_GRACE_MS = 2_000

/** One server of the pool: its session, replaced when it dies, and its catalogue entries, made once. */
class PooledServer {
  private state:
    | { readonly kind: 'up'; readonly session: McpSession }
    | { readonly kind: 'down'; readonly reason: string }
    | { readonly kind: 'starting'; readonly started: Promise<McpSession | string> }
    | { readonly kind: 'closed' }
  readonly handle: McpServerHandle
  /** The sessions already being ended (a session retired by a call and then by its own end is ended once). */
  private readonly retired = new WeakSet<McpSession>()

  constructor(
    readonly server: string,
    private readonly resolved: ResolvedMcpServer,
    private readonly options: McpSessionOptions,
    session: McpSession,
    tools: McpToolSet
  ) {
    this.state = { kind: 'up', session }
    this.watch(session)
    this.handle = { server, tools: tools.tools, leftOut: tools.leftOut }
  }

  /** The values this server was started with, for every run that uses it to redact. */
  get secretValues(): ReadonlyArray<string> {
    return this.resolved.secrets
  }

  /**
   * One call, answered by the process that received it (docs/tools.md, "Failures"): a call the
   * session never sent (its process had exited) goes to the server started again, once, and
   * what that process answers is the outcome. One that was sent to a process that then died is
   * answered as not running: the server may have done it, and it is not sent twice.
   */
  readonly call = async (tool: string, args: ToolArguments, signal: AbortSignal): Promise<ToolOutcome> => {
    for (let attempt = 1; ; attempt++) {
      const session = await this.session()
      if (typeof session === 'string') return failed(session)
      const outcome = await session.call(tool, args, signal)
      if (outcome !== undefined) return outcome
      const reason = session.downReason() ?? 'it stopped'
      this.retire(session, reason)
      if (attempt === 2 || this.closed) return failed(`${mcpServerLabel(this.server)} is not running (${reason})`)
    }
  }

  async close(): Promise<void> {
    const state = this.state
    this.state = { kind: 'closed' }
    if (state.kind === 'up') await state.session.close()
    if (state.kind === 'starting') {
      const started = await state.started
      if (typeof started !== 'string') await started.close()
    }
  }

  // A getter, so that a check after an `await` reads the state as it is then.
  private get closed(): boolean {
    return this.state.kind === 'closed'
  }

  private watch(session: McpSession): void {
    session.onDown = (reason) => this.retire(session, reason)
  }

  /**
   * `session` can take no more calls: the next call starts the server again. Only that session
   * is ended, never one started after it (the state may have moved on to a new one already).
   */
  private retire(session: McpSession, reason: string): void {
    if (this.state.kind === 'up' && this.state.session === session) this.state = { kind: 'down', reason }
    if (this.retired.has(session)) return
    this.retired.add(session)
    // What is left of it (an HTTP session's streams, a stdio server's group) ends now, not at
    // close; answers a dead process wrote before it exited are still read first.
    setImmediate(() => void session.close().catch(() => undefined))
  }

  /** The live session, started again once if it died; else why not, as the outcome's text. */
  private async session(): Promise<McpSession | string> {
    const current = this.state
    // A session whose process exited (its pipes may not have closed yet) or that went down
    // before it was watched is retired here, so that this call goes to a new process.
    if (current.kind === 'up') {
      const reason = current.session.downReason()
      if (reason === undefined) return current.session
      this.retire(current.session, reason)
    }
    const state = this.state
    switch (state.kind) {
      case 'up':
        return state.session
      case 'closed':
        return `${mcpServerLabel(this.server)} is not running (its pool was closed)`
      case 'starting':
        return state.started
      case 'down': {
        const started = openMcpSession(this.server, this.resolved.launch, this.options).then(
          (session) => session,
          (error: unknown) => {
            const detail = error instanceof McpServerError ? error.message.replace(`${mcpServerLabel(this.server)}: `, '') : String(error)
            return `${mcpServerLabel(this.server)} is not running (${state.reason}); starting it again failed: ${detail}`
          }
        )
        this.state = { kind: 'starting', started }
        const session = await started
        // Closed meanwhile: `close` ends the new session.
        if (this.closed) return `${mcpServerLabel(this.server)} is not running (its pool was closed)`
        if (typeof session === 'string') {
          // The next call tries again: the server may be back by then.
          this.state = { kind: 'down', reason: state.reason }
          return session
        }
        this.state = { kind: 'up', session }
        this.watch(session)
        // Down before it was watched: the next call finds it so (`downReason`) and starts another.
        return session
      }
    }
  }
}

const asServerError =
  (server: string) =>
  (error: unknown): McpServerError =>
    error instanceof McpServerError ? error : new McpServerError({ server, reason: 'protocol', message: `${mcpServerLabel(server)}: ${String(error)}` })

/** A pool of MCP servers, empty until a run starts one. */
export const makeMcpPool = (poolOptions: McpPoolOptions = {}): McpPool => {
  const servers = new Map<string, Promise<PooledServer>>()
  let closing: Promise<void> | undefined

  const startServer = async (server: string, resolved: ResolvedMcpServer, inheritedEnv: NodeJS.ProcessEnv): Promise<PooledServer> => {
    const secrets = makeSecretSet(resolved.secrets)
    const options: McpSessionOptions = {
      inheritedEnv,
      startTimeoutMs: poolOptions.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS,
      killGraceMs: poolOptions.killGraceMs ?? DEFAULT_KILL_GRACE_MS,
      redact: (text) => secrets.redact(text)
    }
    const session = await openMcpSession(server, resolved.launch, options)
    // The entries call through `pooled`, which does not exist yet: they are made before it.
    let pooled: PooledServer | undefined
    const tools = mcpToolDefinitions(server, session.tools, (tool, args, signal) => pooled!.call(tool, args, signal))
    if (Either.isLeft(tools)) {
      await session.close()
      throw tools.left
    }
    pooled = new PooledServer(server, resolved, options, session, tools.right)
    return pooled
  }

  const closedError = (server: string) => new McpServerError({ server, reason: 'closed', message: `${mcpServerLabel(server)}: its pool was closed` })

  const start = (server: string, spec: McpServerSpec, options: McpStartOptions = {}): Effect.Effect<McpServerHandle, McpServerError> =>
    Effect.suspend(() => {
      if (closing !== undefined) return Effect.fail(closedError(server))
      const env = options.env ?? process.env
      const baseDir = options.cwd ?? process.cwd()
      // Read on every start: a run whose environment lacks a variable is told so, started server or not.
      const resolved = resolveMcpServer(server, spec, env, baseDir)
      if (Either.isLeft(resolved)) return Effect.fail(resolved.left)
      for (const value of resolved.right.secrets) options.secrets?.add(value)
      const key = mcpServerKey(server, spec, baseDir)
      let pooled = servers.get(key)
      if (pooled === undefined) {
        const started = startServer(server, resolved.right, env)
        pooled = started
        servers.set(key, started)
        // A server that did not start is not kept: the next run tries again.
        started.catch(() => {
          if (servers.get(key) === started) servers.delete(key)
        })
      }
      const waited = pooled
      return Effect.tryPromise({ try: () => waited, catch: asServerError(server) }).pipe(
        Effect.map((entry) => {
          // The values the server runs with, should they differ from this run's.
          for (const value of entry.secretValues) options.secrets?.add(value)
          return entry.handle
        })
      )
    })

  return {
    start,
    startAll: (all, options) => Effect.forEach(Object.entries(all ?? {}), ([server, spec]) => start(server, spec, options), { concurrency: 'unbounded' }),
    close: () => {
      closing ??= Promise.allSettled([...servers.values()].map((pooled) => pooled.then((entry) => entry.close()))).then(() => servers.clear())
      return closing
    }
  }
}
