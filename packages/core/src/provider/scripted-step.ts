import { Schema } from 'effect'

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
  retryAfterMs: Schema.optional(Schema.NonNegative),
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
  delayMs: Schema.optional(Schema.NonNegative),
  usage: Schema.optional(Schema.Struct({ inputTokens: Schema.NonNegative, outputTokens: Schema.NonNegative }))
})
export type ScriptedStep = typeof ScriptedStep.Type

/** What a scripted model says once its steps are used up. */
export const SCRIPT_EXHAUSTED_TEXT = 'done'
