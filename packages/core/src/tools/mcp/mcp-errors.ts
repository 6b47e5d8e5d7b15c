import { Data } from 'effect'
import { quoteName } from '../../contract/quote-name.js'

/**
 * Why an MCP server could not be used (docs/tools.md, "MCP servers"):
 * - `config`: its spec cannot be used as written (a `fromEnv` variable that is not set).
 * - `spawn`: its command could not be started (not found, not executable, no such `cwd`).
 * - `exited`: its process ended before it answered.
 * - `unreachable`: its URL could not be reached.
 * - `refused`: its URL answered with an HTTP error (a 401 for wrong credentials).
 * - `timeout`: it did not answer `initialize` or `tools/list` in time.
 * - `protocol`: it answered, but not as an MCP server should.
 * - `tool-name`: one of its tools cannot be named in the catalogue (`<server>__<tool>`), or has no name.
 * - `tool-schema`: one of its tools has a schema past the bounds of docs/tools.md, or not one MCP allows.
 * - `closed`: the pool was closed.
 */
export type McpServerErrorReason = 'config' | 'spawn' | 'exited' | 'unreachable' | 'refused' | 'timeout' | 'protocol' | 'tool-name' | 'tool-schema' | 'closed'

/**
 * An MCP server that could not be started or listed. `message` is one line that names the server
 * (`MCP server "docs": command "nope" not found`), never holds a `fromEnv` value, and is meant
 * to be shown as it is, without a stack trace.
 */
export class McpServerError extends Data.TaggedError('McpServerError')<{
  readonly server: string
  readonly reason: McpServerErrorReason
  readonly message: string
}> {}

/** How every message names a server: `MCP server "docs"`, its name quoted as every name is (docs/task-file.md, "Names in messages"). */
export const mcpServerLabel = (server: string): string => `MCP server ${quoteName(server)}`
