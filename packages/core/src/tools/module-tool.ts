import { Effect, Either } from 'effect'
import { joinViolationTexts } from '../schema/json-schema-check.js'
import { type DefinedTool, isDefinedTool, ToolDefinitionError, type ToolRunContext } from './define-tool.js'
import { decodeArgumentsObject } from './tool-arguments.js'
import type { CallableTool, ToolAct, ToolContext } from './tool-definition.js'
import { isPromiseLike, oneLine, type CheckedArguments } from './tool-input.js'
import { failed, succeeded, type ToolOutcome } from './tool-outcome.js'

/*
 * A `defineTool` value as an entry of the tool catalogue (docs/tools.md, "Tools of your own"):
 * the same shape as a built-in, source `module`, judged by the policy as act `tool` on its name.
 */

/** How much of a tool's answer the model is given, like `read_file`: a longer one is cut with a note. */
export const MODULE_TOOL_MAX_OUTPUT_BYTES = 100 * 1024

/**
 * The arguments of a tool whose schema checks them asynchronously: `decode` has to answer at once,
 * so the check is finished by `run`, inside the call's Effect.
 */
class PendingArguments {
  constructor(readonly validated: Promise<CheckedArguments<unknown>>) {}
}

/** Arguments an asynchronous check refused inside `run`, answered as the catalogue answers a refusal by `decode` (tool-catalogue.ts). */
const invalidArguments = (name: string, issues: ReadonlyArray<string>): string => `Invalid arguments for ${name}: ${joinViolationTexts(issues)}`

/** `text` cut to `MODULE_TOOL_MAX_OUTPUT_BYTES` of UTF-8 at a character boundary, with a note saying so. */
const capped = (name: string, text: string): string => {
  // Each UTF-16 unit is at most 3 bytes of UTF-8: most answers are known to fit without counting.
  if (text.length * 3 <= MODULE_TOOL_MAX_OUTPUT_BYTES) return text
  const bytes = Buffer.from(text)
  if (bytes.length <= MODULE_TOOL_MAX_OUTPUT_BYTES) return text
  // A streaming decode holds back a character split by the cut instead of answering U+FFFD.
  const head = new TextDecoder().decode(bytes.subarray(0, MODULE_TOOL_MAX_OUTPUT_BYTES), { stream: true })
  return `${head}\n\n[${name}: truncated, showing the first ${Buffer.byteLength(head)} of ${bytes.length} bytes]`
}

const messageOf = (error: unknown): string => {
  try {
    if (error instanceof Error) return error.message
    if (typeof error === 'string') return error
    return JSON.stringify(error) ?? String(error)
  } catch {
    return String(error)
  }
}

/** A throw or a rejection: its message, never its stack (which tells the model nothing and shows host paths). */
const thrownOutcome = (name: string, error: unknown): ToolOutcome => failed(capped(name, `Tool ${name} failed: ${messageOf(error)}`))

/** What the model is answered for what `run` returned: a string as it is, anything else as JSON. */
const resultOutcome = (name: string, value: unknown): ToolOutcome => {
  if (typeof value === 'string') return succeeded(capped(name, value))
  if (value === undefined) return succeeded('')
  let text: string | undefined
  try {
    text = JSON.stringify(value)
  } catch (error) {
    return failed(`Tool ${name} failed: its result is not JSON: ${oneLine(error)}`)
  }
  return text === undefined ? failed(`Tool ${name} failed: its result is not JSON (a ${typeof value})`) : succeeded(capped(name, text))
}

/** `run` called now: its outcome when it answered synchronously, else a promise of it that never rejects. */
const started = <A>(tool: DefinedTool<A>, args: A, ctx: ToolRunContext): ToolOutcome | Promise<ToolOutcome> => {
  let value: unknown
  try {
    value = tool.run(args, ctx)
  } catch (error) {
    return thrownOutcome(tool.name, error)
  }
  // Handlers are attached at once: a rejection before the call's Effect runs is never unhandled.
  return isPromiseLike(value)
    ? Promise.resolve(value).then(
        (result) => resultOutcome(tool.name, result),
        (error) => thrownOutcome(tool.name, error)
      )
    : resultOutcome(tool.name, value)
}

/**
 * The Effect that waits for a call answering later. Its timeout and its interruption (the run is
 * cancelled, times out, or loses its lease) abort the call's signal; the call's own answer after
 * that is dropped. The signal is aborted before the timeout is answered, so a tool that looks at
 * it afterwards finds it aborted.
 */
const awaited = (tool: DefinedTool, outcome: Promise<ToolOutcome>, controller: AbortController): Effect.Effect<ToolOutcome> =>
  Effect.async<ToolOutcome>((resume) => {
    let done = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const finish = (answer: ToolOutcome): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      resume(Effect.succeed(answer))
    }
    const ms = tool.timeoutMs
    if (ms !== undefined) {
      timer = setTimeout(() => {
        const message = `Tool ${tool.name} timed out after ${ms} ms`
        controller.abort(new DOMException(message, 'TimeoutError'))
        finish(failed(message))
      }, ms)
    }
    void outcome.then(finish)
    return Effect.sync(() => {
      done = true
      clearTimeout(timer)
      controller.abort(new DOMException(`Tool ${tool.name} was cancelled`, 'AbortError'))
    })
  })

/** What `run` is told of its call. Own properties, so that spreading or printing it shows them; the key is made only if read. */
const runContextOf = (ctx: ToolContext, signal: AbortSignal): ToolRunContext => ({
  signal,
  runId: ctx.runId,
  step: ctx.step,
  callId: ctx.callId,
  get idempotencyKey() {
    return ctx.idempotencyKey
  },
  workspace: ctx.workspace.root
})

const made = new WeakMap<DefinedTool, CallableTool>()

const toCallable = <A>(tool: DefinedTool<A>): CallableTool<A | PendingArguments> => {
  const act: ToolAct = { act: 'tool', target: tool.name }
  return {
    name: tool.name,
    source: 'module',
    spec: { name: tool.name, description: tool.description, parameters: tool.parameters },
    effect: tool.effect,
    runsAs: 'call',
    decode: (raw) => {
      const fields = decodeArgumentsObject(raw)
      if (Either.isLeft(fields)) return Either.left(fields.left)
      const checked = tool.validate(fields.right)
      if (isPromiseLike(checked)) {
        const validated = Promise.resolve(checked)
        // A call refused after decoding (by the policy) never awaits its check: its failure is not unhandled.
        validated.catch(() => undefined)
        return Either.right(new PendingArguments(validated as Promise<CheckedArguments<unknown>>))
      }
      return checked.ok ? Either.right(checked.value) : Either.left(joinViolationTexts(checked.issues))
    },
    policy: () => act,
    run: (args, ctx) => {
      const controller = new AbortController()
      const runCtx = runContextOf(ctx, controller.signal)
      const now =
        args instanceof PendingArguments
          ? args.validated.then(
              (checked) => (checked.ok ? started(tool, checked.value as A, runCtx) : failed(invalidArguments(tool.name, checked.issues))),
              (error) => failed(`Invalid arguments for ${tool.name}: cannot be checked: ${messageOf(error)}`)
            )
          : started(tool, args, runCtx)
      return isPromiseLike(now) ? awaited(tool, now, controller) : now
    }
  }
}

/**
 * The catalogue entry of a `defineTool` value (source `module`, policy act `tool` on its name),
 * for a tool module's exports and for tools given to `Agentvisor.open({ tools })` alike. The same
 * value always gives the same entry. Throws a `ToolDefinitionError` for anything that is not a
 * `defineTool` value of this version.
 *
 * @example
 * const catalogue = Either.getOrThrow(makeToolCatalogue([...BUILTIN_TOOLS, catalogueToolOf(lookupTicket)]))
 */
export const catalogueToolOf = <A>(tool: DefinedTool<A>): CallableTool => {
  const value: unknown = tool
  if (!isDefinedTool(value)) {
    const name = typeof value === 'object' && value !== null && 'name' in value ? String(value.name) : String(value)
    throw new ToolDefinitionError({ tool: name, problem: 'is not a defineTool value of this agentvisor version' })
  }
  let entry = made.get(value)
  if (entry === undefined) {
    entry = toCallable(value) as CallableTool
    made.set(value, entry)
  }
  return entry
}
