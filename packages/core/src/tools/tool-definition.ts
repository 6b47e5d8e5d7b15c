import type { Effect, Either } from 'effect'
import type { Act } from '../policy/policy.js'
import type { ToolSpec } from '../provider/provider.js'
import type { CommandSettings } from './command-env.js'
import { argumentsObjectOf } from './tool-arguments.js'
import type { ToolOutcome } from './tool-outcome.js'
import type { Workspace } from './workspace.js'

/**
 * What running a tool can do to the world, and so how the run's journal treats its calls
 * (docs/durability.md, "The tool-effect journal"):
 * - `read`: no side effect. Not journalled; a step whose calls all read costs one commit.
 * - `idempotent`: journalled; a completed call is replayed, never run again; one interrupted
 *   after it started is run again, with the same `idempotencyKey` (`write_file`: the same content).
 * - `effect`: journalled; a completed call is replayed; one interrupted after it started may or
 *   may not have had its effect, so the run pauses for an operator's recovery decision (`exec`).
 */
export const ToolEffect = { read: 'read', idempotent: 'idempotent', effect: 'effect' } as const
export type ToolEffect = (typeof ToolEffect)[keyof typeof ToolEffect]

/** Where a tool comes from: agentvisor itself, a tool module, or an MCP server (`mcp:<server>`). */
export type ToolSource = 'builtin' | 'module' | `mcp:${string}`

/** What a tool call does in policy terms: an act on a target (a workspace path or a command line). */
export interface ToolAct {
  readonly act: Act
  readonly target: string
}

/** A call's raw arguments as the JSON object the model sent, before any tool decodes them. */
export type ToolArguments = Readonly<Record<string, unknown>>

/**
 * What a running call knows of where it runs. `idempotencyKey` is the same every time the same
 * call of the same step runs (a resume re-running an interrupted `idempotent` call included), and
 * different for every other call: a tool hands it to a service that deduplicates requests.
 * There is no abort signal: a tool's `run` is an Effect, and interrupting it is the cancel (`exec`
 * kills its process group); a tool written as a promise gets its signal from the Effect that
 * wraps it.
 */
export interface ToolContext {
  readonly runId: string
  readonly step: number
  /** The id the model gave the call. */
  readonly callId: string
  readonly idempotencyKey: string
  readonly workspace: Workspace
  /** How commands run for this run: the environment without its keys, and its sandbox (docs/task-file.md). */
  readonly commands: CommandSettings
}

interface ToolBase<A> {
  readonly name: string
  readonly source: ToolSource
  /** Exactly what the model is offered: name, description and JSON Schema parameters. */
  readonly spec: ToolSpec
  readonly effect: ToolEffect
  /**
   * The raw arguments text as the tool's typed arguments, or a one-line reason naming the
   * field, which the model is told as `Invalid arguments for <name>: <reason>`.
   */
  readonly decode: (raw: string) => Either.Either<A, string>
  /**
   * The act and target the policy judges (docs/policy.md), read from the arguments as sent and
   * before they are decoded, so that a call aimed at a denied target is refused and audited even
   * when another of its fields is malformed; undefined when the call names no target the policy
   * judges (the tool then answers the model with what is wrong, or the tool is not judged by act).
   */
  readonly policy: (fields: ToolArguments) => ToolAct | undefined
}

/** A tool the driver runs itself: decode, judge, journal as its effect class says, then `run`. */
export interface CallableTool<A = unknown> extends ToolBase<A> {
  readonly runsAs: 'call'
  /**
   * Performs one call with decoded arguments. Never fails: every problem is an `ok: false`
   * outcome telling the model why. A tool whose work is done by the time `run` returns may hand
   * back its outcome itself (a settled form) instead of an Effect: the run's step then goes on
   * without an Effect fiber (docs/architecture.md, "The hot path"). (A method, so that a
   * catalogue holds tools of different argument types: `run` only ever receives what the same
   * tool's `decode` produced.)
   */
  run(args: A, ctx: ToolContext): ToolOutcome | Effect.Effect<ToolOutcome>
}

/**
 * A tool whose call starts a child run (`spawn_child`): the driver hands it to the run's
 * children (docs/nats.md), whose child-run rows are its journal. A child's id derives from the
 * call, so a resume finds the child it started rather than starting another: `idempotent`.
 */
export interface ChildRunTool<A = unknown> extends ToolBase<A> {
  readonly runsAs: 'child-run'
}

/**
 * One tool, everything about it in one place: its spec for the model, how its arguments
 * decode, the policy act and target it is judged by, its effect class and how it runs. The
 * journal, the policy, approvals and recovery read these, never a list of tool names
 * (docs/task-file.md, "Tools offered to the model").
 */
export type ToolDefinition<A = unknown> = CallableTool<A> | ChildRunTool<A>

/**
 * The act and target of a call of `tool` with `raw` arguments; undefined for an unknown tool,
 * arguments that are not a JSON object, or a call the tool's policy reading finds no target in.
 */
export const toolActOf = (tool: ToolDefinition | undefined, raw: string): ToolAct | undefined => {
  if (tool === undefined) return undefined
  const fields = argumentsObjectOf(raw)
  return fields === undefined ? undefined : tool.policy(fields)
}

/**
 * The context of one call inside a run. The key is built only when a tool asks for it: the
 * built-ins never do, and a step pays nothing for it.
 */
export class RunToolContext implements ToolContext {
  private key: string | undefined = undefined
  constructor(
    readonly runId: string,
    readonly step: number,
    /** The call's place in its step: with the run and step, what makes the key stable across resumes. */
    readonly position: number,
    readonly callId: string,
    readonly workspace: Workspace,
    readonly commands: CommandSettings
  ) {}

  get idempotencyKey(): string {
    this.key ??= `${this.runId}:${this.step}:${this.position}`
    return this.key
  }
}
