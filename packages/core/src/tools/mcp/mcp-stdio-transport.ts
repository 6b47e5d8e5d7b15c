import { type ChildProcessByStdio, spawn } from 'node:child_process'
import type { Readable, Writable } from 'node:stream'
import { DEFAULT_INHERITED_ENV_VARS } from '@modelcontextprotocol/sdk/client/stdio.js'
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import { processGroupAlive } from '../exec.js'
import type { ResolvedStdioServer } from './mcp-server-spec.js'

/*
 * The stdio transport of an MCP server (docs/tools.md, "MCP servers"). The SDK's own
 * `StdioClientTransport` frames messages the same way (its `ReadBuffer` and `serializeMessage`
 * are used here), but it keeps the exit code to itself and runs the server in our process
 * group, so a server's helpers could outlive it. This one runs the server in a process group of
 * its own, reports how it ended, keeps the last lines of its stderr, and ends the whole group.
 */

/** How a server process ended. */
export interface ChildExit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** Lines of stderr kept for error messages. */
const STDERR_LINES = 5
const STDERR_LINE_MAX = 300
/** Once the server has exited, how long pipes held open by a process that left its group may delay the report. */
const DRAIN_MS = 1_000
const POLL_MS = 20

/** The process groups of every live server, ended if the process exits without closing its pools. */
const liveGroups = new Set<number>()
let exitHookInstalled = false
const installExitHook = (): void => {
  if (exitHookInstalled) return
  exitHookInstalled = true
  process.on('exit', () => {
    for (const pgid of liveGroups) signalGroup(pgid, 'SIGKILL')
  })
}

const signalGroup = (pgid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // ESRCH: the group is already gone, which is what we wanted.
  }
}

const settledWithin = (promise: Promise<void>, ms: number): Promise<boolean> =>
  new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    timer.unref()
    void promise.then(() => {
      clearTimeout(timer)
      resolve(true)
    })
  })

/**
 * The environment a server starts with: the few variables the SDK's own stdio transport
 * inherits (PATH, HOME, ...) and the spec's `env`. Nothing else of ours, API keys included.
 */
export const serverEnv = (inherited: NodeJS.ProcessEnv, own: Readonly<Record<string, string>>): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const name of DEFAULT_INHERITED_ENV_VARS) {
    const value = inherited[name]
    // A value starting with `()` is an exported shell function, which a child shell would run.
    if (value !== undefined && !value.startsWith('()')) env[name] = value
  }
  return { ...env, ...own }
}

/** A message that was never written, because the process had exited: no server read it. */
export class NotSentError extends Error {
  constructor() {
    super('the server process is not running')
    this.name = 'NotSentError'
  }
}

/** An MCP client transport over a child process's stdin and stdout. */
export class ChildProcessTransport implements Transport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: ((message: JSONRPCMessage) => void) | undefined
  /**
   * Told when the process exits, which can be well before `onclose` (a helper that left its group
   * may hold the pipes open for `DRAIN_MS`): from then on nothing sent would be read.
   */
  onexit?: (() => void) | undefined

  private child: ChildProcessByStdio<Writable, Readable, Readable> | undefined
  private readonly buffer = new ReadBuffer()
  private readonly stderrLines: string[] = []
  private stderrPartial = ''
  private ended: ChildExit | undefined
  private broken: string | undefined
  private finished = false
  private markFinished: () => void = () => undefined
  private readonly finishedPromise = new Promise<void>((resolve) => {
    this.markFinished = resolve
  })

  constructor(
    private readonly launch: ResolvedStdioServer,
    private readonly inheritedEnv: NodeJS.ProcessEnv,
    private readonly killGraceMs: number
  ) {}

  /** How the process ended, once it has. */
  get exit(): ChildExit | undefined {
    return this.ended
  }

  /** What it did that made us end it, if it did. */
  get problem(): string | undefined {
    return this.broken
  }

  /** The process id (its group's id too), once started. */
  get pid(): number | undefined {
    return this.child?.pid
  }

  /** The last lines the server wrote to stderr, on one line. */
  stderrTail(): string {
    const lines = [...this.stderrLines, this.stderrPartial].map((line) => line.trim()).filter((line) => line !== '')
    return lines.slice(-3).join(' | ')
  }

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      let spawned = false
      let child: ChildProcessByStdio<Writable, Readable, Readable>
      try {
        child = spawn(this.launch.command, [...this.launch.args], {
          cwd: this.launch.cwd,
          env: serverEnv(this.inheritedEnv, this.launch.env),
          // Its stdout is the protocol and its stderr is kept: neither reaches our own output.
          stdio: ['pipe', 'pipe', 'pipe'],
          // A group of its own, so that closing ends its helpers too.
          detached: true,
          shell: false
        })
      } catch (error) {
        // Arguments spawn refuses outright (a NUL byte in an argument).
        reject(error)
        return
      }
      this.child = child
      child.on('error', (error) => {
        if (spawned) this.onerror?.(error)
        else reject(error)
      })
      child.on('spawn', () => {
        spawned = true
        if (child.pid !== undefined) {
          installExitHook()
          liveGroups.add(child.pid)
        }
        resolve()
      })
      child.on('exit', (code, signal) => {
        this.ended = { code, signal }
        this.onexit?.()
        // The server is gone: whatever it left running in its group goes too.
        if (child.pid !== undefined) signalGroup(child.pid, 'SIGKILL')
        // 'close' waits for the pipes; a process that left the group may hold them open.
        setTimeout(() => {
          child.stdout.destroy()
          child.stderr.destroy()
        }, DRAIN_MS).unref()
      })
      child.on('close', (code, signal) => {
        this.ended ??= { code, signal: signal as NodeJS.Signals | null }
        if (child.pid !== undefined) liveGroups.delete(child.pid)
        this.finished = true
        this.markFinished()
        this.onclose?.()
      })
      // An unhandled stream error would crash the process: report it instead.
      child.stdin.on('error', (error) => this.onerror?.(error))
      child.stdout.on('error', (error) => this.onerror?.(error))
      child.stderr.on('error', () => undefined)
      child.stdout.on('data', (chunk: Buffer) => {
        try {
          this.buffer.append(chunk)
        } catch {
          // A line past the SDK's 10 MiB cap: no message will ever end it, and the server goes.
          this.broken ??= 'sent a message larger than 10 MiB'
          void this.close()
          return
        }
        this.readMessages()
      })
      child.stderr.on('data', (chunk: Buffer) => this.keepStderr(chunk.toString('utf8')))
    })
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin
    if (stdin === undefined || this.ended !== undefined || !stdin.writable) return Promise.reject(new NotSentError())
    return new Promise((resolve, reject) => stdin.write(serializeMessage(message), (error) => (error ? reject(error) : resolve())))
  }

  /**
   * Ends the server the way the MCP specification asks: its stdin closed, then SIGTERM, then
   * SIGKILL, each after `killGraceMs`; resolves once the process and its group are gone.
   */
  async close(): Promise<void> {
    const child = this.child
    if (child === undefined || child.pid === undefined) return
    const pgid = child.pid
    if (!this.finished) {
      child.stdin.end()
      if (!(await settledWithin(this.finishedPromise, this.killGraceMs))) {
        signalGroup(pgid, 'SIGTERM')
        if (!(await settledWithin(this.finishedPromise, this.killGraceMs))) {
          signalGroup(pgid, 'SIGKILL')
          await this.finishedPromise
        }
      }
    }
    // A helper that ignored the leader's end, or left after it: SIGKILL cannot be ignored.
    while (processGroupAlive(pgid)) {
      signalGroup(pgid, 'SIGKILL')
      await new Promise((resolve) => setTimeout(resolve, POLL_MS))
    }
    this.buffer.clear()
  }

  private readMessages(): void {
    for (;;) {
      let message: JSONRPCMessage | null
      try {
        message = this.buffer.readMessage()
      } catch (error) {
        // A line that is not JSON-RPC (a stray log line on stdout): reported, and the next one read.
        this.onerror?.(error instanceof Error ? error : new Error(String(error)))
        continue
      }
      if (message === null) return
      try {
        this.onmessage?.(message)
      } catch (error) {
        // The data handler must not throw: that would be an uncaught exception of the process.
        this.onerror?.(error instanceof Error ? error : new Error(String(error)))
      }
    }
  }

  private keepStderr(text: string): void {
    const lines = (this.stderrPartial + text).split('\n')
    this.stderrPartial = (lines.pop() ?? '').slice(-STDERR_LINE_MAX)
    for (const line of lines) {
      if (line.trim() === '') continue
      this.stderrLines.push(line.slice(0, STDERR_LINE_MAX))
      if (this.stderrLines.length > STDERR_LINES) this.stderrLines.shift()
    }
  }
}
