import { Effect, Either, Exit } from 'effect'
import { quoteName } from '../contract/quote-name.js'
import { ContractError } from '../errors.js'
import type { ToolSpec } from '../provider/provider.js'
import { execDefinition, listDirDefinition, readFileDefinition, spawnChildDefinition, writeFileDefinition } from './builtin-tools.js'
import type { ToolContext, ToolDefinition } from './tool-definition.js'
import { failed, type ToolOutcome } from './tool-outcome.js'

/** A tool call as the model sent it: `arguments` is the raw JSON text, possibly malformed. */
export interface ToolCallRequest {
  readonly name: string
  readonly arguments: string
}

/**
 * The tools a run knows, by name, and what it offers the model. Tools that start child runs are
 * known even when not offered, so that a run that may not have children still answers a call
 * of one with why not (docs/nats.md).
 */
export interface ToolCatalogue {
  /** Every tool, in the order the model is offered them. */
  readonly tools: ReadonlyArray<ToolDefinition>
  readonly get: (name: string) => ToolDefinition | undefined
  /** The specs offered to the model; tools that start child runs only when the run may have children. */
  readonly offered: (withChildren: boolean) => ReadonlyArray<ToolSpec>
  /** The answer to a call of a tool this catalogue cannot run as a call (unknown, or a child run's). */
  readonly unknownAnswer: (name: string) => ToolOutcome
}

/**
 * A catalogue of `tools`, in that order, or a `ContractError` naming the first name two tools
 * share. Everything a step asks of it is computed here, once: a step looks a tool up by name
 * and nothing else.
 */
export const makeToolCatalogue = (tools: ReadonlyArray<ToolDefinition>): Either.Either<ToolCatalogue, ContractError> => {
  const byName = new Map<string, ToolDefinition>()
  for (const tool of tools) {
    if (byName.has(tool.name)) return Either.left(new ContractError({ message: `tools: two tools are named ${quoteName(tool.name)}`, field: 'tools' }))
    byName.set(tool.name, tool)
  }
  const withChildren = tools.map((tool) => tool.spec)
  const withoutChildren = tools.filter((tool) => tool.runsAs !== 'child-run').map((tool) => tool.spec)
  // What the model is told it may call instead: the tools that run as calls.
  const available = tools
    .filter((tool) => tool.runsAs === 'call')
    .map((tool) => tool.name)
    .join(', ')
  return Either.right({
    tools,
    get: (name) => byName.get(name),
    offered: (children) => (children ? withChildren : withoutChildren),
    unknownAnswer: (name) => failed(`Unknown tool ${quoteName(name)}. Available tools: ${available}`)
  })
}

/** The built-in tools, in the order they are offered (docs/task-file.md, "Tools offered to the model"). */
export const BUILTIN_TOOLS: ReadonlyArray<ToolDefinition> = [readFileDefinition, writeFileDefinition, listDirDefinition, execDefinition, spawnChildDefinition]

/** The catalogue of a run that has only the built-in tools. */
export const builtinCatalogue: ToolCatalogue = Either.getOrThrow(makeToolCatalogue(BUILTIN_TOOLS))

/**
 * Runs one call of `tool` (the catalogue's entry for `call.name`, looked up by the caller, who
 * needs it anyway). Never fails: malformed arguments, an unknown tool, a workspace escape (with
 * its refusal) and any I/O error come back as an `ok: false` outcome whose output tells the
 * model why. Interrupting it interrupts the tool (`exec` kills its process group).
 */
export const runToolCall = (catalogue: ToolCatalogue, tool: ToolDefinition | undefined, call: ToolCallRequest, ctx: ToolContext): Effect.Effect<ToolOutcome> =>
  Effect.suspend(() => {
    const outcome = runToolCallNow(catalogue, tool, call, ctx)
    return Effect.isEffect(outcome) ? outcome : Effect.succeed(outcome)
  })

/**
 * `runToolCall` started now: the outcome itself when it is had at once (an unknown tool, bad
 * arguments, a tool whose `run` settled), else the Effect that finishes the call. The run
 * driver's form: a step whose tools answer at once costs no Effect.
 */
export const runToolCallNow = (
  catalogue: ToolCatalogue,
  tool: ToolDefinition | undefined,
  call: ToolCallRequest,
  ctx: ToolContext
): ToolOutcome | Effect.Effect<ToolOutcome> => {
  if (tool === undefined || tool.runsAs !== 'call') return catalogue.unknownAnswer(call.name)
  let ran: ToolOutcome | Effect.Effect<ToolOutcome>
  try {
    const decoded = tool.decode(call.arguments)
    if (Either.isLeft(decoded)) return failed(`Invalid arguments for ${tool.name}: ${decoded.left}`)
    ran = tool.run(decoded.right, ctx)
  } catch (defect) {
    return unexpected(call, defect)
  }
  if (!Effect.isEffect(ran)) return ran
  // An Effect already settled (`Effect.succeed`) is had at once too.
  if (Exit.isExit(ran) && Exit.isSuccess(ran)) return (ran as Exit.Success<ToolOutcome, never>).value
  // The tools catch their own I/O errors; this is the last guard that keeps "never fails" true.
  return Effect.catchAllDefect(ran, (defect) => Effect.succeed(unexpected(call, defect)))
}

const unexpected = (call: ToolCallRequest, defect: unknown): ToolOutcome =>
  failed(`Tool ${call.name} failed unexpectedly: ${defect instanceof Error ? defect.message : String(defect)}`)
