import { Effect } from 'effect'
import type OpenAI from 'openai'
import { createRequire } from 'node:module'
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool
} from 'openai/resources/chat/completions'
import { ProviderError } from '../errors.js'
import { boundArgumentsText } from '../tools/tool-arguments.js'
import { providerErrorFromConnection, providerErrorFromStatus } from './http-error.js'
import type { ChatMessage, ChatReply, ChatRequest, Provider, ToolCall, ToolSpec } from './provider.js'
import { readStream } from './stream-reader.js'
import { makeSecretSet, type SecretSet } from '../secrets/secret-set.js'
import type { ModelSettings } from '../contract/agent-spec.js'

/** How to reach one OpenAI-compatible chat-completions endpoint. */
export interface OpenAIProviderOptions {
  readonly name: string
  readonly model: string
  /** Defaults to the SDK's (OpenAI's API, or `OPENAI_BASE_URL`). */
  readonly baseUrl?: string | undefined
  /** Without a key a placeholder is sent: local servers ignore it, and the SDK then never reads `OPENAI_API_KEY` itself. */
  readonly apiKey?: string | undefined
  /** Ask for server-sent events and reassemble them; measures time to first token. */
  readonly stream?: boolean | undefined
  /**
   * What this provider's errors and cut-off answers are redacted with; the key is added to it.
   * Without one, a set of this key alone (docs/task-file.md, "API keys").
   */
  readonly secrets?: SecretSet | undefined
  /** The agent's sampling settings (docs/agents.md, "Model settings"), sent with every request. */
  readonly settings?: ModelSettings | undefined
}

// The longest timer Node accepts: deadlines are the caller's (its timeout interrupts the Effect,
// which aborts the request), so the SDK must never race them with a timer of its own.
const NO_SDK_TIMEOUT_MS = 2_147_483_647

const requireSdk = createRequire(import.meta.url)
let sdk: typeof OpenAI | undefined
/**
 * The SDK, loaded when the first such provider is made: a few hundred modules that a process
 * which never calls this kind of model (`show`, `approve`, another provider's run) would load for
 * nothing at every start.
 */
const openAISdk = (): typeof OpenAI => (sdk ??= (requireSdk('openai') as { default: typeof OpenAI }).default)

/**
 * A provider for any OpenAI-compatible chat-completions server, through the official SDK with its
 * retries off (retries and fall-over are the run machine's). Interrupting `chat` aborts the request.
 *
 * @example
 * const provider = makeOpenAIProvider({ name: 'primary', model: 'gpt-4o-mini', baseUrl: 'http://127.0.0.1:8080/v1' })
 * const reply = await Effect.runPromise(provider.chat({ messages: [{ role: 'user', content: 'hi' }], tools: [] }))
 */
export const makeOpenAIProvider = (given: OpenAIProviderOptions): Provider => {
  const options = withSecrets(given)
  const client = new (openAISdk())({
    apiKey: options.apiKey ?? 'unused',
    baseURL: options.baseUrl,
    maxRetries: 0,
    timeout: NO_SDK_TIMEOUT_MS
  })
  const { name, secrets } = options
  const send = options.stream === true ? sendStreaming : sendPlain
  return {
    name,
    kind: 'openai',
    chat: (request) =>
      Effect.tryPromise({
        try: (signal) => send(client, options, request, signal),
        catch: (error) => toProviderError(name, error, secrets)
      })
  }
}

/**
 * The options with the key trimmed and registered as a secret. fetch strips a header value's
 * surrounding whitespace anyway (a key read from a file often ends in a newline), so the server
 * sees the trimmed key whichever is handed over: trimming here only makes that explicit.
 */
const withSecrets = (options: OpenAIProviderOptions): OpenAIProviderOptions & { readonly secrets: SecretSet } => {
  const secrets = options.secrets ?? makeSecretSet()
  secrets.add(options.apiKey)
  return { ...options, apiKey: options.apiKey?.trim(), secrets }
}

type Send = (client: OpenAI, options: OpenAIProviderOptions & { readonly secrets: SecretSet }, request: ChatRequest, signal: AbortSignal) => Promise<ChatReply>

const sendPlain: Send = async (client, options, request, signal) => {
  const body: ChatCompletionCreateParamsNonStreaming = { model: options.model, ...wireSettings(options.settings), ...toWire(request) }
  const completion = await client.chat.completions.create(body, { signal })
  return fromCompletion(options.name, completion)
}

const sendStreaming: Send = async (client, options, request, signal) => {
  const started = performance.now()
  const body: ChatCompletionCreateParamsStreaming = {
    model: options.model,
    ...wireSettings(options.settings),
    ...toWire(request),
    stream: true,
    stream_options: { include_usage: true }
  }
  // An error status arrives here, before any event: it is mapped like a plain request's.
  const stream = await client.chat.completions.create(body, { signal })
  const assembly = new StreamAssembly(request.onText)
  // The SDK ends the iteration quietly on [DONE] *and* on an abort; without a finish reason the
  // answer is incomplete whichever it was.
  const timeToFirstTokenMs = await readStream(
    stream,
    { add: (chunk) => assembly.add(chunk), partialText: () => assembly.text, complete: () => assembly.finishReason !== undefined },
    options,
    started
  )
  return { ...assembly.reply(), timeToFirstTokenMs }
}

/** Reassembles streamed deltas: text concatenated, tool calls keyed by their `index`. */
class StreamAssembly {
  text = ''
  finishReason: string | undefined
  private usage: ChatReply['usage']
  private readonly calls = new Map<number, { id: string; name: string; arguments: string }>()

  constructor(private readonly onText: ((delta: string) => void) | undefined) {}

  add(chunk: ChatCompletionChunk): void {
    if (chunk.usage != null) {
      this.usage = { inputTokens: chunk.usage.prompt_tokens, outputTokens: chunk.usage.completion_tokens }
    }
    const choice = chunk.choices[0]
    if (choice === undefined) return
    if (typeof choice.delta.content === 'string' && choice.delta.content !== '') {
      this.text += choice.delta.content
      this.onText?.(choice.delta.content)
    }
    for (const delta of choice.delta.tool_calls ?? []) {
      // id and name come with a call's first delta; later deltas carry only argument pieces.
      const call = this.calls.get(delta.index) ?? { id: '', name: '', arguments: '' }
      if (delta.id) call.id = delta.id
      if (delta.function?.name) call.name += delta.function.name
      if (delta.function?.arguments) call.arguments += delta.function.arguments
      this.calls.set(delta.index, call)
    }
    if (choice.finish_reason != null) this.finishReason = choice.finish_reason
  }

  reply(): ChatReply {
    const toolCalls: ToolCall[] = [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, call]) => ({ id: call.id === '' ? `call_${index}` : call.id, name: call.name, arguments: boundArgumentsText(call.arguments) }))
    return { text: this.text, toolCalls, usage: this.usage }
  }
}

/**
 * The settings as chat-completions fields, only those given. `maxTokens` is `max_tokens`, the
 * field every OpenAI-compatible server reads (docs/agents.md).
 */
const wireSettings = (settings: ModelSettings | undefined): { temperature?: number; top_p?: number; max_tokens?: number } => {
  if (settings === undefined) return {}
  return {
    ...(settings.temperature !== undefined ? { temperature: settings.temperature } : {}),
    ...(settings.topP !== undefined ? { top_p: settings.topP } : {}),
    ...(settings.maxTokens !== undefined ? { max_tokens: settings.maxTokens } : {})
  }
}

const toWire = (request: ChatRequest): { messages: ChatCompletionMessageParam[]; tools?: ChatCompletionTool[] } => ({
  messages: request.messages.map(toWireMessage),
  // OpenAI rejects an empty `tools` array, so none is sent when no tool is offered.
  ...(request.tools.length > 0 ? { tools: request.tools.map(toWireTool) } : {})
})

const toWireMessage = (message: ChatMessage): ChatCompletionMessageParam => {
  switch (message.role) {
    case 'system':
    case 'user':
      return { role: message.role, content: message.content }
    case 'assistant':
      if (message.toolCalls.length === 0) return { role: 'assistant', content: message.content }
      return {
        role: 'assistant',
        // Several servers reject an empty string next to tool calls; null is the documented form.
        content: message.content === '' ? null : message.content,
        tool_calls: message.toolCalls.map((call) => ({
          id: call.id,
          type: 'function',
          function: { name: call.name, arguments: call.arguments }
        }))
      }
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content }
  }
}

const toWireTool = (tool: ToolSpec): ChatCompletionTool => ({
  type: 'function',
  function: { name: tool.name, description: tool.description, parameters: { ...tool.parameters } }
})

const fromCompletion = (provider: string, completion: ChatCompletion): ChatReply => {
  const choice = completion.choices[0]
  if (choice === undefined) {
    throw new ProviderError({ kind: 'transient', provider, possiblyDelivered: true, message: 'the server answered with no choices' })
  }
  const toolCalls: ToolCall[] = []
  for (const call of choice.message.tool_calls ?? []) {
    // Only function tools are offered, so a `custom` call cannot be meant for us. Arguments too
    // deeply nested are dropped here, where the reply is decoded (docs/task-file.md).
    if (call.type === 'function') toolCalls.push({ id: call.id, name: call.function.name, arguments: boundArgumentsText(call.function.arguments) })
  }
  return {
    text: choice.message.content ?? '',
    toolCalls,
    usage: completion.usage === undefined ? undefined : { inputTokens: completion.usage.prompt_tokens, outputTokens: completion.usage.completion_tokens }
  }
}

/** Maps whatever the SDK threw to our typed error (docs/cli.md), never echoing the key. */
const toProviderError = (provider: string, error: unknown, secrets: SecretSet): ProviderError => {
  if (error instanceof ProviderError) return error
  if (error instanceof openAISdk().APIConnectionTimeoutError) return providerErrorFromConnection(provider, error, { timedOut: true, secrets })
  if (error instanceof openAISdk().APIUserAbortError) {
    // Only seen when the caller aborted; the interrupted Effect discards it, but keep it honest.
    return new ProviderError({ kind: 'transient', provider, possiblyDelivered: true, message: 'request aborted', cause: error })
  }
  if (error instanceof openAISdk().APIConnectionError) return providerErrorFromConnection(provider, error.cause ?? error, { secrets })
  if (error instanceof openAISdk().APIError && error.status !== undefined) {
    return providerErrorFromStatus(provider, { status: error.status, headers: error.headers, message: error.message, code: error.code, cause: error }, secrets)
  }
  const detail = error instanceof Error ? error.message : String(error)
  return new ProviderError({
    kind: 'transient',
    provider,
    possiblyDelivered: true,
    message: `unexpected failure: ${secrets.redact(detail).split('\n')[0]}`,
    cause: error
  })
}
