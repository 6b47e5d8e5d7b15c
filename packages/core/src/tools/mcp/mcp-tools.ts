import type { Tool, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js'
import { Effect, Either } from 'effect'
import type { CallableTool, ToolArguments, ToolEffect } from '../tool-definition.js'
import type { ToolOutcome } from '../tool-outcome.js'
import { McpServerError, mcpServerLabel } from './mcp-errors.js'
import { argumentsDecoder } from './mcp-json-schema.js'
import { quoteName } from '../../contract/quote-name.js'
import { toolSchemaOutOfBounds } from '../../schema/schema-bounds.js'

/*
 * An MCP server's tools as entries of the tool catalogue (docs/tools.md, "MCP servers"): named
 * `<server>__<tool>`, judged by the policy as the `tool` act on that name, their effect class
 * read from the tool's annotations, and run as a `tools/call` that interrupting cancels.
 */

/** What every name in the catalogue must match: the strictest provider's rule (OpenAI's). */
export const CATALOGUE_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/

/** The catalogue name of `tool` of `server`. */
export const mcpToolName = (server: string, tool: string): string => `${server}__${tool}`

/**
 * The effect class an MCP tool's annotations claim: `readOnlyHint` is `read`, `idempotentHint`
 * is `idempotent`, and anything else, no annotations included, is `effect` (the MCP default:
 * a tool may change the world, and not the same way twice). The hints are the server's word:
 * they decide how the journal replays a call, not whether the policy allows it.
 */
export const mcpToolEffect = (annotations: ToolAnnotations | undefined): ToolEffect =>
  annotations?.readOnlyHint === true ? 'read' : annotations?.idempotentHint === true ? 'idempotent' : 'effect'

/** Performs one call of a server's tool (by its own name); never rejects. */
export type McpToolCall = (tool: string, args: ToolArguments, signal: AbortSignal) => Promise<ToolOutcome>

/** A tool of a server that is not offered, and why. */
export interface McpToolLeftOut {
  readonly tool: string
  readonly reason: string
}

/** A server's tools as catalogue entries, and those it lists that cannot be. */
export interface McpToolSet {
  readonly tools: ReadonlyArray<CallableTool<ToolArguments>>
  readonly leftOut: ReadonlyArray<McpToolLeftOut>
}

/**
 * The catalogue entries of `server`'s `tools`, in the order it listed them, or an error naming
 * the server and the first tool that cannot be one. A tool whose catalogue name
 * (`<server>__<tool>`) would not match `CATALOGUE_TOOL_NAME` (a `.` or `/` in its name, or
 * longer than 64 characters in all) refuses the whole server rather than leaving the tool out
 * or renaming it: a tool missing without a word, or called by a name its server never
 * published, would be harder to find than a server that does not start. A tool that can only
 * run as an MCP task (`execution.taskSupport: "required"`) is left out, and said so in
 * `leftOut`: agentvisor calls tools with a plain `tools/call`, which such a tool refuses.
 *
 * Each entry's spec is the tool's description (its title when it has none) and its
 * `inputSchema`; its arguments decode as a JSON object checked against that schema; its `run`
 * is an Effect whose interruption aborts the request, so the SDK sends the server
 * `notifications/cancelled`.
 */
export const mcpToolDefinitions = (server: string, tools: ReadonlyArray<Tool>, call: McpToolCall): Either.Either<McpToolSet, McpServerError> => {
  const definitions: CallableTool<ToolArguments>[] = []
  const leftOut: McpToolLeftOut[] = []
  const names = new Set<string>()
  for (const tool of tools) {
    if (tool.execution?.taskSupport === 'required') {
      leftOut.push({ tool: tool.name, reason: 'it runs only as an MCP task, which agentvisor does not call' })
      continue
    }
    const refused = (reason: 'tool-name' | 'tool-schema', problem: string) =>
      Either.left(new McpServerError({ server, reason, message: `${mcpServerLabel(server)}: ${problem}` }))
    // MCP requires a name; `<server>__` would be offered, and called, in place of one.
    if (tool.name === '') return refused('tool-name', 'it lists a tool with an empty name, which MCP does not allow')
    const name = mcpToolName(server, tool.name)
    if (!CATALOGUE_TOOL_NAME.test(name)) {
      const why =
        name.length > 64
          ? `is ${name.length} characters long, more than the 64 a tool name may have (a shorter server name may fit it)`
          : 'has characters a tool name may not have (only letters, digits, _ and -)'
      return refused('tool-name', `its tool ${quoteName(tool.name)} cannot be offered: its name ${quoteName(name)} ${why}`)
    }
    if (names.has(name)) return refused('tool-name', `it lists two tools named ${quoteName(tool.name)}`)
    // Before anything serialises or compiles them: both are recursive (docs/tools.md, "Bounds on a tool's schema").
    for (const field of ['inputSchema', 'outputSchema'] as const) {
      const outOfBounds = tool[field] === undefined ? undefined : toolSchemaOutOfBounds(tool[field])
      if (outOfBounds !== undefined) return refused('tool-schema', `its tool ${quoteName(tool.name)} cannot be offered: its ${field} ${outOfBounds}`)
    }
    names.add(name)
    const target = { act: 'tool', target: name } as const
    definitions.push({
      name,
      source: `mcp:${server}`,
      spec: {
        name,
        description: tool.description ?? tool.title ?? tool.annotations?.title ?? `${tool.name} (from MCP server ${server})`,
        parameters: tool.inputSchema
      },
      effect: mcpToolEffect(tool.annotations),
      runsAs: 'call',
      decode: argumentsDecoder(tool.inputSchema),
      policy: () => target,
      run: (args) => Effect.promise((signal) => call(tool.name, args, signal))
    })
  }
  return Either.right({ tools: definitions, leftOut })
}
