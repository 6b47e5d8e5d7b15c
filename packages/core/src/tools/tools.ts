import { Effect, Either } from 'effect'
import type { CommandSettings } from './command-env.js'
import { execTool } from './exec-tool.js'
import { listDirTool, readFileTool, writeFileTool } from './file-tools.js'
import { decodeExecArgs, decodeListDirArgs, decodeReadFileArgs, decodeWriteFileArgs } from './tool-arguments.js'
import { failed, type ToolOutcome } from './tool-outcome.js'
import { WORKSPACE_TOOL_NAMES } from './tool-specs.js'
import type { Workspace } from './workspace.js'

export type { ToolOutcome } from './tool-outcome.js'
export { SPAWN_CHILD_TOOL, WORKSPACE_TOOLS, WORKSPACE_TOOL_NAMES, type WorkspaceToolName } from './tool-specs.js'
export { commandEnv, contractSecretNames, runCommandSettings, type CommandSettings } from './command-env.js'
export { findBwrap, sandboxUnavailable } from './sandbox.js'

/** A tool call as the model sent it: `arguments` is the raw JSON text, possibly malformed. */
export interface ToolCallRequest {
  readonly name: string
  readonly arguments: string
}

/** How `exec` runs: its environment (the host's minus credential-like variables when omitted) and its sandbox. */
export type RunToolOptions = CommandSettings

const withArgs = <A>(toolName: string, decoded: Either.Either<A, string>, run: (args: A) => Effect.Effect<ToolOutcome>): Effect.Effect<ToolOutcome> =>
  Either.match(decoded, {
    onLeft: (reason) => Effect.succeed(failed(`Invalid arguments for ${toolName}: ${reason}`)),
    onRight: run
  })

/**
 * Runs one workspace tool call (`read_file`, `write_file`, `list_dir`, `exec`) confined to `ws`.
 * Never fails: malformed arguments, an unknown tool, a workspace escape (with its refusal) and
 * any I/O error come back as an `ok: false` outcome whose output tells the model why.
 * Interrupting it while `exec` runs kills the command's process group before it completes.
 *
 * @example
 * const outcome = yield* runTool(ws, { name: 'write_file', arguments: '{"path":"out.txt","content":"DONE"}' })
 * // { ok: true, output: 'Wrote 4 bytes to out.txt' }
 */
export const runTool = (ws: Workspace, call: ToolCallRequest, options: RunToolOptions = {}): Effect.Effect<ToolOutcome> => {
  const run = (): Effect.Effect<ToolOutcome> => {
    switch (call.name) {
      case 'read_file':
        return withArgs(call.name, decodeReadFileArgs(call.arguments), (args) => readFileTool(ws, args))
      case 'write_file':
        return withArgs(call.name, decodeWriteFileArgs(call.arguments), (args) => writeFileTool(ws, args))
      case 'list_dir':
        return withArgs(call.name, decodeListDirArgs(call.arguments), (args) => listDirTool(ws, args))
      case 'exec':
        return withArgs(call.name, decodeExecArgs(call.arguments), (args) => execTool(ws, args, options))
      default:
        return Effect.succeed(failed(`Unknown tool ${JSON.stringify(call.name)}. Available tools: ${WORKSPACE_TOOL_NAMES.join(', ')}`))
    }
  }
  // The tools catch their own I/O errors; this is the last guard that keeps "never fails" true.
  return Effect.suspend(run).pipe(
    Effect.catchAllDefect((defect) =>
      Effect.succeed(failed(`Tool ${call.name} failed unexpectedly: ${defect instanceof Error ? defect.message : String(defect)}`))
    )
  )
}
