import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import type { ToolArguments } from '../tool-definition.js'
import type { ToolOutcome } from '../tool-outcome.js'

// One connection to one MCP server (docs/tools.md, "MCP servers"), as the pool uses it
// (mcp-pool.ts); mcp-client.ts opens one.

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
