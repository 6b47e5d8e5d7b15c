import { Schema } from 'effect'

/** The longest delay Node's timers take (2^31-1 ms, about 24.8 days): longer ones fire at once. */
export const MAX_TIMER_MS = 2_147_483_647
/** A duration in ms that becomes a timer, so within what timers accept (docs/task-file.md). */
export const TimerMs = <S extends Schema.Schema.Any, A extends number>(self: S & Schema.Schema<A, Schema.Schema.Encoded<S>, Schema.Schema.Context<S>>) =>
  self.pipe(Schema.lessThanOrEqualTo(MAX_TIMER_MS, { message: () => `must be at most ${MAX_TIMER_MS} ms (the longest timer Node accepts)` }))
const DelayMs = Schema.NonNegative.pipe(TimerMs)
const TokenCount = Schema.NonNegativeInt

/**
 * One scripted model answer, shared by the `scripted` provider and the mock LLM server:
 * tool calls, plain text, an HTTP error (with Retry-After), or a dropped connection, each
 * optionally after `delayMs`.
 */
export const ScriptedToolCall = Schema.Struct({
  name: Schema.String,
  // An object is sent as JSON; a string is sent verbatim (to script malformed arguments).
  arguments: Schema.optional(Schema.Union(Schema.String, Schema.Record({ key: Schema.String, value: Schema.Unknown })))
})
export type ScriptedToolCall = typeof ScriptedToolCall.Type

export const ScriptedError = Schema.Struct({
  status: Schema.Int.pipe(Schema.between(100, 599)),
  retryAfterMs: Schema.optional(DelayMs),
  message: Schema.optional(Schema.String),
  /**
   * The mock LLM only (docs/mock-llm.md): the message ends with the credential header the request
   * carried (`Authorization` or `x-api-key`), as a careless server echoes it. Tests redaction.
   */
  echoAuthorization: Schema.optional(Schema.Boolean)
})
export type ScriptedError = typeof ScriptedError.Type

export const ScriptedStep = Schema.Struct({
  toolCalls: Schema.optional(Schema.Array(ScriptedToolCall)),
  text: Schema.optional(Schema.String),
  error: Schema.optional(ScriptedError),
  disconnect: Schema.optional(Schema.Boolean),
  delayMs: Schema.optional(DelayMs),
  /** The mock LLM only (docs/mock-llm.md): a streamed answer waits this long before each of its chunks after the first. */
  chunkDelayMs: Schema.optional(DelayMs),
  usage: Schema.optional(Schema.Struct({ inputTokens: TokenCount, outputTokens: TokenCount }))
})
export type ScriptedStep = typeof ScriptedStep.Type

/** What a scripted model says once its steps are used up. */
export const SCRIPT_EXHAUSTED_TEXT = 'done'
