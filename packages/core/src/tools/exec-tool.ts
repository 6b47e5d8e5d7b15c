import { Effect } from 'effect'
import { commandEnv, type CommandSettings } from './command-env.js'
import { type CommandResult, runCommand } from './exec.js'
import type { ExecArgs } from './tool-arguments.js'
import type { ToolOutcome } from './tool-outcome.js'
import { EXEC_DEFAULT_TIMEOUT_MS, EXEC_MAX_TIMEOUT_MS } from './tool-specs.js'
import type { Workspace } from './workspace.js'

const section = (title: string, text: string): string => `${title}:\n${text === '' ? '(empty)' : text.replace(/\n$/, '')}`

/** The command's result as the model reads it: how it ended first, then both streams. */
export const formatCommandResult = (result: CommandResult, timeoutMs: number): string => {
  const ending =
    result.exitCode !== null
      ? `exit code: ${result.exitCode}`
      : result.signal !== null
        ? `killed by signal ${result.signal}`
        : 'the command could not be started'
  const notes = [
    ...(result.timedOut ? [`timed out after ${timeoutMs} ms; the command and everything it started were killed`] : []),
    ...(result.truncated ? ['output truncated: only the first part of each stream is shown'] : [])
  ]
  return [ending, ...notes, section('stdout', result.stdout), section('stderr', result.stderr)].join('\n')
}

/**
 * `exec`: runs the command in the workspace root with credentials stripped from its environment,
 * confined when `settings` carries a sandbox. The model's `timeoutMs` is capped so it cannot hold
 * a step open indefinitely.
 */
export const execTool = (ws: Workspace, args: ExecArgs, settings: CommandSettings = {}): Effect.Effect<ToolOutcome> => {
  const timeoutMs = Math.min(args.timeoutMs ?? EXEC_DEFAULT_TIMEOUT_MS, EXEC_MAX_TIMEOUT_MS)
  const env = settings.env ?? commandEnv()
  return runCommand({ command: args.command, cwd: ws.root, timeoutMs, env, sandbox: settings.sandbox }).pipe(
    Effect.map((result) => ({
      ok: result.exitCode === 0 && !result.timedOut,
      output: formatCommandResult(result, timeoutMs)
    }))
  )
}
