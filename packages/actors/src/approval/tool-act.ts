import type { Act } from '@agentvisor/core'

/** What a tool call does in policy terms: an act on a target (a workspace path or a command line). */
export interface ToolAct {
  readonly act: Act
  readonly target: string
}

/**
 * The act and target of a tool call, read from its raw arguments; undefined when the call is
 * malformed or unknown (the tool itself then answers the model with what is wrong).
 */
export const toolActOf = (call: { readonly name: string; readonly arguments: string }): ToolAct | undefined => {
  let args: unknown
  try {
    args = JSON.parse(call.arguments.trim() === '' ? '{}' : call.arguments)
  } catch {
    return undefined
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return undefined
  const record = args as Record<string, unknown>
  switch (call.name) {
    case 'read_file':
      return typeof record['path'] === 'string' ? { act: 'read', target: record['path'] } : undefined
    case 'list_dir': {
      const target = record['path'] ?? '.'
      return typeof target === 'string' ? { act: 'read', target } : undefined
    }
    case 'write_file':
      return typeof record['path'] === 'string' ? { act: 'write', target: record['path'] } : undefined
    case 'exec':
      return typeof record['command'] === 'string' ? { act: 'exec', target: record['command'] } : undefined
    default:
      return undefined
  }
}
