import { builtinCatalogue, type ToolAct, type ToolCatalogue, toolActOf as actOfTool } from '@agentvisor/core'

export type { ToolAct } from '@agentvisor/core'

/**
 * The act and target of a tool call, read by its tool's definition in `tools` (the built-ins
 * when omitted) from its raw arguments; undefined when the call is malformed or unknown (the
 * tool itself then answers the model with what is wrong).
 */
export const toolActOf = (call: { readonly name: string; readonly arguments: string }, tools: ToolCatalogue = builtinCatalogue): ToolAct | undefined =>
  actOfTool(tools.get(call.name), call.arguments)
