import { Data, Either, type Schema } from 'effect'
import { quoteName } from '../contract/quote-name.js'
import { MAX_TIMER_MS } from '../provider/scripted-step.js'
import { ToolEffect } from './tool-definition.js'
import { type JsonSchemaInput, type StandardSchemaV1, toolInput, type CheckedArguments } from './tool-input.js'

/**
 * What a tool's `run` knows of the call it performs (docs/tools.md, "Tools of your own").
 * `idempotencyKey` is the same every time the same call of the same step runs (a resume re-running
 * an interrupted `idempotent` call included) and different for every other call: hand it to a
 * service that deduplicates requests. `signal` is aborted when the call is cancelled (the run is
 * cancelled, times out or stops) or runs past the tool's `timeoutMs`.
 */
export interface ToolRunContext {
  readonly signal: AbortSignal
  readonly runId: string
  readonly step: number
  /** The id the model gave the call. */
  readonly callId: string
  readonly idempotencyKey: string
  /** The workspace's absolute (real) path. */
  readonly workspace: string
}

/**
 * What `defineTool` takes, whatever the kind of `input`. `run` returns (or resolves to) a string,
 * which the model is answered as it is, or any JSON value, answered as its JSON text; `undefined`
 * answers an empty text. A throw or a rejection answers `Tool <name> failed: <message>`.
 */
export interface ToolOptions<A> {
  /** What the model calls the tool: 1 to 64 letters, digits, `_` or `-`. */
  readonly name: string
  /** What the model is told the tool does. */
  readonly description: string
  /**
   * What the tool does to the world (docs/durability.md, "The tool-effect journal"): `read` (no
   * side effect; not journalled), `idempotent` (journalled; run again on resume with the same
   * `idempotencyKey`), or `effect` (the default: journalled; an interrupted call waits for an
   * operator's decision).
   */
  readonly effect?: ToolEffect | undefined
  /** How long a call may take before its signal is aborted and the model is told it timed out; no limit when omitted. */
  readonly timeoutMs?: number | undefined
  /**
   * The JSON Schema offered to the model, for an Effect or Standard Schema `input` whose own is
   * not wanted or not available (a Standard Schema without `~standard.jsonSchema`, such as
   * valibot's without its converter). The arguments are still checked by `input` only.
   */
  readonly parameters?: JsonSchemaInput | undefined
  readonly run: (args: A, ctx: ToolRunContext) => unknown
}

/** The key that marks a `defineTool` value: `Symbol.for`, so that two copies of this package agree on it. */
export const DEFINED_TOOL: unique symbol = Symbol.for('agentvisor.defineTool')
/** The version of the shape below: a copy of this package that finds another version refuses the value rather than misread it. */
export const DEFINED_TOOL_VERSION = 1

/**
 * A tool defined in code, ready to be offered: what `defineTool` returns. Plain data and
 * functions only, so that another copy of `@agentvisor/core` (a tool module that resolves its own)
 * can turn it into a catalogue entry as well as this one.
 */
export interface DefinedTool<A = unknown> {
  readonly [DEFINED_TOOL]: typeof DEFINED_TOOL_VERSION
  readonly name: string
  readonly description: string
  readonly effect: ToolEffect
  readonly timeoutMs: number | undefined
  /** The JSON Schema offered to the model: an object schema without `$schema`. */
  readonly parameters: Readonly<Record<string, unknown>>
  /** The arguments object checked against `input`; a promise for an asynchronous schema. */
  validate(value: unknown): CheckedArguments<A> | Promise<CheckedArguments<A>>
  /** (Methods, so that a list holds tools of different argument types: `run` only ever gets what `validate` produced.) */
  run(args: A, ctx: ToolRunContext): unknown
}

/**
 * A `defineTool` call that cannot make a tool: `message` is one line naming the tool and the problem.
 *
 * @example
 * defineTool({ name: 'look up', description: 'Looks up', input: { type: 'object' }, run: () => '' })
 * // throws ToolDefinitionError: defineTool "look up": name must be 1 to 64 letters, digits, "_" or "-"
 */
export class ToolDefinitionError extends Data.TaggedError('ToolDefinitionError')<{
  /** The name given, as given (it may be the problem). */
  readonly tool: string
  readonly problem: string
}> {
  override get message(): string {
    return `defineTool ${quoteName(this.tool)}: ${this.problem}`
  }
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/

/**
 * Whether `value` is a `defineTool` value of this shape, made by this copy of the package or another.
 *
 * @example
 * const tools = Object.values(await import('./tools.mjs')).filter(isDefinedTool)
 */
export const isDefinedTool = (value: unknown): value is DefinedTool =>
  typeof value === 'object' && value !== null && (value as { [DEFINED_TOOL]?: unknown })[DEFINED_TOOL] === DEFINED_TOOL_VERSION

/** Whether `value` carries the mark of a `defineTool` value, whatever its version. */
export const hasDefinedToolMark = (value: unknown): boolean => typeof value === 'object' && value !== null && DEFINED_TOOL in value

const checkedEffect = (effect: unknown): Either.Either<ToolEffect, string> =>
  effect === undefined
    ? Either.right(ToolEffect.effect)
    : typeof effect === 'string' && Object.hasOwn(ToolEffect, effect)
      ? Either.right(effect as ToolEffect)
      : Either.left(`effect must be "read", "idempotent" or "effect", got ${JSON.stringify(effect)}`)

const checkedTimeout = (timeoutMs: unknown): Either.Either<number | undefined, string> =>
  timeoutMs === undefined
    ? Either.right(undefined)
    : typeof timeoutMs === 'number' && Number.isInteger(timeoutMs) && timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS
      ? Either.right(timeoutMs)
      : Either.left(`timeoutMs must be a positive integer of at most ${MAX_TIMER_MS} ms, got ${JSON.stringify(timeoutMs)}`)

/** Everything of `options` checked, or the first problem found. */
const defined = <A>(options: ToolOptions<A> & { readonly input: unknown }): Either.Either<DefinedTool<A>, string> => {
  if (typeof options !== 'object' || options === null) return Either.left('takes an object: { name, description, input, run }')
  if (typeof options.name !== 'string' || !TOOL_NAME.test(options.name)) return Either.left('name must be 1 to 64 letters, digits, "_" or "-"')
  if (typeof options.description !== 'string' || options.description.trim() === '') return Either.left('description must be a non-empty string')
  if (typeof options.run !== 'function') return Either.left('run must be a function')
  const effect = checkedEffect(options.effect)
  if (Either.isLeft(effect)) return Either.left(effect.left)
  const timeoutMs = checkedTimeout(options.timeoutMs)
  if (Either.isLeft(timeoutMs)) return Either.left(timeoutMs.left)
  const input = toolInput<A>(options.input, { parameters: options.parameters })
  if (Either.isLeft(input)) return Either.left(input.left)
  return Either.right({
    [DEFINED_TOOL]: DEFINED_TOOL_VERSION,
    name: options.name,
    description: options.description,
    effect: effect.right,
    timeoutMs: timeoutMs.right,
    parameters: input.right.parameters,
    validate: input.right.validate,
    run: options.run
  })
}

/** `defineTool`'s forms: the type of `run`'s arguments follows from `input`. */
export interface DefineTool {
  /** `input` an Effect Schema: `args` is its decoded type; the model is offered `JSONSchema.make(input)`. */
  <A, I>(options: ToolOptions<A> & { readonly input: Schema.Schema<A, I, never> }): DefinedTool<A>
  /** `input` a Standard Schema (zod 4, valibot, ...): `args` is its output type; the model is offered `~standard.jsonSchema.input(...)` or `parameters`. */
  <A>(options: ToolOptions<A> & { readonly input: StandardSchemaV1<unknown, A> }): DefinedTool<A>
  /** `input` a JSON Schema: `args` is the checked object, typed as you say (`defineTool<{ id: string }>(...)`). */
  <A = Readonly<Record<string, unknown>>>(options: ToolOptions<A> & { readonly input: JsonSchemaInput }): DefinedTool<A>
}

/**
 * A tool of your own, from a function: offered to the model with `input`'s JSON Schema, its
 * arguments checked against `input` before `run` is called (invalid ones answer the model
 * `Invalid arguments for <name>: <pointer>: <message>; ...` and `run` is not called), judged by the
 * policy as act `tool` on its name (docs/policy.md). Export it from a module listed in a task
 * file's `toolModules`, or give it to `Agentvisor.open({ tools })` (docs/tools.md).
 *
 * `input` is a JSON Schema (checked with ajv), an Effect Schema (offered as `JSONSchema.make`) or
 * any Standard Schema; zod 4 schemas offer their JSON Schema through the Standard JSON Schema
 * interface (`~standard.jsonSchema`), and a Standard Schema without it needs `parameters`. The
 * offered schema must be an object schema; `$schema` is left out of it.
 *
 * Throws a `ToolDefinitionError` (one line naming the tool and the problem) for a bad name, an
 * empty description, an unknown effect class, a bad `timeoutMs`, a JSON Schema ajv cannot
 * compile, an input of no known kind, or an offered schema that is not an object schema.
 *
 * @example
 * export const lookupTicket = defineTool({
 *   name: 'lookup_ticket',
 *   description: 'The title and status of a ticket',
 *   input: z.object({ id: z.string().regex(/^T-\d+$/) }),
 *   effect: 'read',
 *   timeoutMs: 10_000,
 *   run: async ({ id }, { signal }) => (await fetch(`https://tickets.example/${id}`, { signal })).json()
 * })
 */
export const defineTool: DefineTool = <A>(options: ToolOptions<A> & { readonly input: unknown }): DefinedTool<A> => {
  const tool = defined(options)
  if (Either.isLeft(tool)) throw new ToolDefinitionError({ tool: String(options?.name), problem: tool.left })
  return tool.right
}
