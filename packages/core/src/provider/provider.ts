import type { Effect } from 'effect'
import type { ProviderError } from '../errors.js'

/**
 * A tool call as the model produced it. `arguments` is the raw JSON text: a malformed one is fed
 * back to the model rather than rejected by the adapter.
 */
export interface ToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

/** The provider-neutral conversation every adapter translates to its own wire format. */
export type ChatMessage =
  | { readonly role: 'system'; readonly content: string }
  | { readonly role: 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string; readonly toolCalls: ReadonlyArray<ToolCall> }
  | { readonly role: 'tool'; readonly toolCallId: string; readonly name: string; readonly content: string }

/** A tool offered to the model: a name, a description and a JSON Schema for its arguments. */
export interface ToolSpec {
  readonly name: string
  readonly description: string
  readonly parameters: Readonly<Record<string, unknown>>
}

export interface ChatRequest {
  /**
   * The conversation so far. The driver hands its live array (no copy per dispatch) and appends
   * to it only once the answer is in: an adapter reads it when its Effect runs, and one that keeps
   * the request for later must copy it.
   */
  readonly messages: ReadonlyArray<ChatMessage>
  readonly tools: ReadonlyArray<ToolSpec>
  /**
   * Called with each piece of the answer's text as it arrives (a streaming adapter's deltas; the
   * scripted provider's text in pieces), before the call resolves. Absent: nobody listens.
   */
  readonly onText?: ((delta: string) => void) | undefined
  /** The run's step this call answers (1-based), when a run's driver makes it. */
  readonly step?: number | undefined
  /**
   * How many calls the run made to this provider before this one (0 for its first), when a run's
   * driver makes it: counted from the run's receipts, so the same after a pause, a resume in
   * another process, or a crash (a call lost with it counts). A `scripted` provider plays the step
   * at this index (docs/task-file.md, "Providers").
   */
  readonly dispatch?: number | undefined
}

export interface TokenUsage {
  readonly inputTokens: number
  readonly outputTokens: number
}

/** A successful model answer: text, tool calls (possibly none) and what it cost. */
export interface ChatReply {
  readonly text: string
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly usage?: TokenUsage | undefined
  /** Milliseconds from dispatch to the first streamed byte; undefined when not streamed. */
  readonly timeToFirstTokenMs?: number | undefined
}

export const ProviderKind = { openai: 'openai', anthropic: 'anthropic', scripted: 'scripted' } as const
export type ProviderKind = (typeof ProviderKind)[keyof typeof ProviderKind]

/**
 * One model endpoint of a fallback chain. `chat` is interruptible: interrupting the Effect aborts
 * the HTTP request in flight. Adapters never retry; retries and fall-over are the run machine's.
 */
export interface Provider {
  readonly name: string
  readonly kind: ProviderKind
  readonly chat: (request: ChatRequest) => Effect.Effect<ChatReply, ProviderError>
}
