import type { Effect } from 'effect'
import type { CommandSettings } from './command-env.js'
import { builtinCatalogue, runToolCall, type ToolCallRequest } from './tool-catalogue.js'
import type { ToolOutcome } from './tool-outcome.js'
import { SPAWN_CHILD_SPEC } from './tool-specs.js'
import type { Workspace } from './workspace.js'

/**
 * The tools offered to the model for working in its workspace (docs/task-file.md): the built-in
 * catalogue's offer to a run that may not start children.
 */
export const WORKSPACE_TOOLS = builtinCatalogue.offered(false)
/** The names of the workspace tools, in the order they are offered. */
export const WORKSPACE_TOOL_NAMES = ['read_file', 'write_file', 'list_dir', 'exec'] as const
export type WorkspaceToolName = (typeof WORKSPACE_TOOL_NAMES)[number]
/**
 * `spawn_child` (docs/nats.md): starts a child run and answers with its final result. Offered
 * only to runs allowed to have children (their depth is below `children.maxDepth`).
 */
export const SPAWN_CHILD_TOOL = SPAWN_CHILD_SPEC

/** How `exec` runs: its environment (the host's minus credential-like variables when omitted) and its sandbox. */
export type RunToolOptions = CommandSettings

/**
 * Runs one workspace tool call (`read_file`, `write_file`, `list_dir`, `exec`) confined to `ws`,
 * outside any run (its context has no run, step or call id). Never fails: malformed arguments,
 * an unknown tool, a workspace escape (with its refusal) and any I/O error come back as an
 * `ok: false` outcome whose output tells the model why. Interrupting it while `exec` runs kills
 * the command's process group before it completes.
 *
 * @example
 * const outcome = yield* runTool(ws, { name: 'write_file', arguments: '{"path":"out.txt","content":"DONE"}' })
 * // { ok: true, output: 'Wrote 4 bytes to out.txt' }
 */
export const runTool = (ws: Workspace, call: ToolCallRequest, options: RunToolOptions = {}): Effect.Effect<ToolOutcome> =>
  runToolCall(builtinCatalogue, builtinCatalogue.get(call.name), call, {
    runId: '',
    step: 0,
    callId: '',
    idempotencyKey: '',
    workspace: ws,
    commands: options
  })
