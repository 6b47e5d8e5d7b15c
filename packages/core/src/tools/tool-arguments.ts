import { Either } from 'effect'
import { quoteName } from '../contract/quote-name.js'
import { jsonTextTooDeep, MAX_NESTING_DEPTH, valueTooDeepAt } from '../contract/nesting.js'
import { MAX_TIMER_MS } from '../provider/scripted-step.js'

/**
 * Decoding of the raw JSON arguments a model sends with a tool call. Failures are a short reason
 * naming the field, written for the model to read and correct, never an exception.
 */

export interface ReadFileArgs {
  readonly path: string
}
export interface WriteFileArgs {
  readonly path: string
  readonly content: string
}
export interface ListDirArgs {
  readonly path: string
}
export interface ExecArgs {
  readonly command: string
  readonly timeoutMs?: number | undefined
}

type Fields = Readonly<Record<string, unknown>>

/**
 * What a provider adapter keeps instead of tool-call arguments nested deeper than
 * `MAX_NESTING_DEPTH` (docs/task-file.md): they are never kept, stored, replayed or serialised
 * again, since every recursive serialiser downstream would overflow on them. It is not JSON, so
 * every reader takes the call as malformed and the model is told why.
 */
export const TOO_DEEP_ARGUMENTS = `(arguments nested deeper than ${MAX_NESTING_DEPTH} levels, not kept)`
const TOO_DEEP_REASON = `nested deeper than ${MAX_NESTING_DEPTH} levels; send flatter arguments`

/** The arguments text an adapter hands on for the raw JSON text the model sent. */
export const boundArgumentsText = (raw: string): string => (jsonTextTooDeep(raw, MAX_NESTING_DEPTH) ? TOO_DEEP_ARGUMENTS : raw)

/** The arguments text for arguments the SDK already parsed (Anthropic's `tool_use.input`). */
export const argumentsTextOf = (input: unknown): string =>
  valueTooDeepAt(input, MAX_NESTING_DEPTH) !== undefined ? TOO_DEEP_ARGUMENTS : JSON.stringify(input ?? {})

const describeType = (value: unknown): string => (value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value)

/** The raw arguments as a JSON object, or (a string) why not. */
const parseArgumentsObject = (raw: string): Fields | string => {
  // Some models send an empty string for a call without arguments; that is `{}`.
  if (raw.trim() === '') return {}
  if (raw === TOO_DEEP_ARGUMENTS || jsonTextTooDeep(raw, MAX_NESTING_DEPTH)) return TOO_DEEP_REASON
  let value: unknown
  try {
    value = JSON.parse(raw)
  } catch (error) {
    return `not valid JSON (${error instanceof Error ? error.message : String(error)})`
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `expected a JSON object, got ${describeType(value)}`
  return value as Fields
}

/**
 * The raw arguments as a JSON object, or why not. Nesting is checked here too, for calls that
 * did not come through an adapter (a provider of the TS API's own).
 */
export const decodeArgumentsObject = (raw: string): Either.Either<Fields, string> => {
  const parsed = parseArgumentsObject(raw)
  return typeof parsed === 'string' ? Either.left(parsed) : Either.right(parsed)
}

/**
 * The same object for readers that only need it or nothing (the policy's reading of a call, once
 * per call on every step): undefined where `decodeArgumentsObject` says why not.
 */
export const argumentsObjectOf = (raw: string): Fields | undefined => {
  const parsed = parseArgumentsObject(raw)
  return typeof parsed === 'string' ? undefined : parsed
}

const requiredString = (fields: Fields, name: string): Either.Either<string, string> => {
  const value = fields[name]
  if (value === undefined) return Either.left(`missing required field ${quoteName(name)}`)
  if (typeof value !== 'string') return Either.left(`field ${quoteName(name)} must be a string, got ${describeType(value)}`)
  return Either.right(value)
}

const optionalString = (fields: Fields, name: string, fallback: string): Either.Either<string, string> =>
  fields[name] === undefined || fields[name] === null ? Either.right(fallback) : requiredString(fields, name)

/** A positive duration that becomes a timer: at most 2^31-1 ms, what Node's timers take. */
const optionalTimerMs = (fields: Fields, name: string): Either.Either<number | undefined, string> => {
  const value = fields[name]
  if (value === undefined || value === null) return Either.right(undefined)
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    return Either.left(`field ${quoteName(name)} must be a positive integer, got ${JSON.stringify(value)}`)
  }
  if (value > MAX_TIMER_MS) return Either.left(`field ${quoteName(name)} must be at most ${MAX_TIMER_MS} ms, got ${value}`)
  return Either.right(value)
}

// The decoders below are plain code, not `Either.gen`: one runs at every tool call of every step,
// and a generator with its adapter costs ten times the decoding itself (docs/architecture.md,
// "The hot path").

/** `{path}`. */
export const decodeReadFileArgs = (raw: string): Either.Either<ReadFileArgs, string> => {
  const fields = parseArgumentsObject(raw)
  if (typeof fields === 'string') return Either.left(fields)
  const path = requiredString(fields, 'path')
  return Either.isLeft(path) ? Either.left(path.left) : Either.right({ path: path.right })
}

/** `{path, content}`. */
export const decodeWriteFileArgs = (raw: string): Either.Either<WriteFileArgs, string> => {
  const fields = parseArgumentsObject(raw)
  if (typeof fields === 'string') return Either.left(fields)
  const path = requiredString(fields, 'path')
  if (Either.isLeft(path)) return Either.left(path.left)
  const content = requiredString(fields, 'content')
  return Either.isLeft(content) ? Either.left(content.left) : Either.right({ path: path.right, content: content.right })
}

/** `{path?}`, the workspace root when omitted. */
export const decodeListDirArgs = (raw: string): Either.Either<ListDirArgs, string> => {
  const fields = parseArgumentsObject(raw)
  if (typeof fields === 'string') return Either.left(fields)
  const path = optionalString(fields, 'path', '.')
  return Either.isLeft(path) ? Either.left(path.left) : Either.right({ path: path.right })
}

/** `{command, timeoutMs?}`; an empty command is refused rather than run as a no-op. */
export const decodeExecArgs = (raw: string): Either.Either<ExecArgs, string> => {
  const fields = parseArgumentsObject(raw)
  if (typeof fields === 'string') return Either.left(fields)
  const command = requiredString(fields, 'command')
  if (Either.isLeft(command)) return Either.left(command.left)
  if (command.right.trim() === '') return Either.left('field "command" must not be empty')
  const timeoutMs = optionalTimerMs(fields, 'timeoutMs')
  return Either.isLeft(timeoutMs) ? Either.left(timeoutMs.left) : Either.right({ command: command.right, timeoutMs: timeoutMs.right })
}
