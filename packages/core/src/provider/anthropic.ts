import type Anthropic from '@anthropic-ai/sdk'
import { createRequire } from 'node:module'
import type {
  ContentBlockParam,
  Message,
  MessageCreateParamsBase,
  MessageParam,
  RawMessageStreamEvent,
  Tool,
  ToolResultBlockParam
} from '@anthropic-ai/sdk/resources/messages'
import { Effect } from 'effect'
import { MAX_NESTING_DEPTH, jsonTextTooDeep } from '../contract/nesting.js'
import { ProviderError } from '../errors.js'
import { argumentsTextOf, boundArgumentsText } from '../tools/tool-arguments.js'
import { providerErrorFromConnection, providerErrorFromStatus } from './http-error.js'
import type { ChatMessage, ChatReply, ChatRequest, Provider, ToolCall, ToolSpec } from './provider.js'
import { readStream } from './stream-reader.js'
import { makeSecretSet, type SecretSet } from '../secrets/secret-set.js'
import type { ModelSettings } from '../contract/agent-spec.js'

/** How to reach an Anthropic Messages API endpoint. */
export interface AnthropicProviderOptions {
  readonly name: string
  readonly model: string
  /**
   * Defaults to the SDK's (Anthropic's API, or `ANTHROPIC_BASE_URL`). A trailing `/v1` is dropped,
   * so the same `http://host:port/v1` written for OpenAI-compatible servers works here too.
   */
  readonly baseUrl?: string | undefined
  /** Without a key a placeholder is sent, so the SDK never falls back to keys or profiles of its own. */
  readonly apiKey?: string | undefined
  /** Ask for server-sent events and reassemble them; measures time to first token. */
  readonly stream?: boolean | undefined
  /**
   * What this provider's errors and cut-off answers are redacted with; the key is added to it.
   * Without one, a set of this key alone (docs/task-file.md, "API keys").
   */
  readonly secrets?: SecretSet | undefined
  /** `max_tokens` is mandatory on this API. */
  readonly maxTokens?: number | undefined
  /** The agent's sampling settings (docs/agents.md, "Model settings"); its `maxTokens` wins over the option's. */
  readonly settings?: ModelSettings | undefined
}

// The longest timer Node accepts: deadlines are the caller's (its timeout interrupts the Effect,
// which aborts the request), so the SDK must never race them with a timer of its own.
const NO_SDK_TIMEOUT_MS = 2_147_483_647

/** The `max_tokens` sent when none is configured: room for a tool call with a file's content. */
export const DEFAULT_ANTHROPIC_MAX_TOKENS = 4096

const requireSdk = createRequire(import.meta.url)
let sdk: typeof Anthropic | undefined
/**
 * The SDK, loaded when the first such provider is made: a few hundred modules that a process
 * which never calls this kind of model (`show`, `approve`, another provider's run) would load for
 * nothing at every start.
 */
const anthropicSdk = (): typeof Anthropic => (sdk ??= (requireSdk('@anthropic-ai/sdk') as { default: typeof Anthropic }).default)

/**
 * A provider for the Anthropic Messages API through the official SDK, retries off. System messages
 * become the `system` parameter, tool calls `tool_use` blocks and tool results `tool_result` blocks.
 * Interrupting `chat` aborts the request.
 */
export const makeAnthropicProvider = (given: AnthropicProviderOptions): Provider => {
  const options = withSecrets(given)
  const client = new (anthropicSdk())({
    apiKey: options.apiKey ?? 'unused',
    baseURL: options.baseUrl === undefined ? undefined : withoutVersion(options.baseUrl),
    maxRetries: 0,
    timeout: NO_SDK_TIMEOUT_MS
  })
  const send = options.stream === true ? sendStreaming : sendPlain
  return {
    name: options.name,
    kind: 'anthropic',
    chat: (request) =>
      Effect.tryPromise({
        try: (signal) => send(client, options, request, signal),
        catch: (error) => toProviderError(options.name, error, options.secrets)
      })
  }
}

/**
 * The options with the key trimmed and registered as a secret. fetch strips a header value's
 * surrounding whitespace anyway (a key read from a file often ends in a newline), so the server
 * sees the trimmed key whichever is handed over: trimming here only makes that explicit.
 */
const withSecrets = (options: AnthropicProviderOptions): AnthropicProviderOptions & { readonly secrets: SecretSet } => {
  const secrets = options.secrets ?? makeSecretSet()
  secrets.add(options.apiKey)
  return { ...options, apiKey: options.apiKey?.trim(), secrets }
}

// The SDK appends `/v1/messages` itself.
const withoutVersion = (baseUrl: string): string => baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '')

type Send = (client: Anthropic, options: AnthropicProviderOptions, request: ChatRequest, signal: AbortSignal) => Promise<ChatReply>

const sendPlain: Send = async (client, options, request, signal) => {
  const message = await client.messages.create({ ...toWire(options, request), stream: false }, { signal })
  return fromMessage(message)
}

const sendStreaming: Send = async (client, options, request, signal) => {
  const started = performance.now()
  // An error status arrives here, before any event: it is mapped like a plain request's.
  const stream = await client.messages.create({ ...toWire(options, request), stream: true }, { signal })
  const assembly = new StreamAssembly(request.onText)
  const timeToFirstTokenMs = await readStream(
    stream,
    { add: (event) => assembly.add(event), partialText: () => assembly.text(), complete: () => assembly.complete },
    options,
    started
  )
  return { ...assembly.reply(), timeToFirstTokenMs }
}

type Block = { kind: 'text'; text: string } | { kind: 'tool'; id: string; name: string; json: string }

/** Reassembles streamed events: text deltas and `input_json_delta` pieces, per content block index. */
class StreamAssembly {
  complete = false
  private readonly blocks = new Map<number, Block>()
  private inputTokens = 0
  private outputTokens = 0

  constructor(private readonly onText: ((delta: string) => void) | undefined) {}

  add(event: RawMessageStreamEvent): void {
    switch (event.type) {
      case 'message_start':
        this.inputTokens = event.message.usage.input_tokens
        this.outputTokens = event.message.usage.output_tokens
        return
      case 'content_block_start': {
        const block = event.content_block
        if (block.type === 'text') {
          this.blocks.set(event.index, { kind: 'text', text: block.text })
          if (block.text !== '') this.onText?.(block.text)
        }
        // The start carries `input: {}`; the real input follows as JSON pieces.
        if (block.type === 'tool_use') this.blocks.set(event.index, { kind: 'tool', id: block.id, name: block.name, json: '' })
        return
      }
      case 'content_block_delta': {
        const block = this.blocks.get(event.index)
        if (event.delta.type === 'text_delta' && block?.kind === 'text') {
          block.text += event.delta.text
          if (event.delta.text !== '') this.onText?.(event.delta.text)
        }
        if (event.delta.type === 'input_json_delta' && block?.kind === 'tool') block.json += event.delta.partial_json
        return
      }
      case 'message_delta':
        // Usage on message_delta is cumulative.
        this.outputTokens = event.usage.output_tokens
        if (event.usage.input_tokens != null) this.inputTokens = event.usage.input_tokens
        return
      case 'message_stop':
        this.complete = true
        return
      case 'content_block_stop':
        return
    }
  }

  private ordered(): Block[] {
    return [...this.blocks.entries()].sort(([a], [b]) => a - b).map(([, block]) => block)
  }

  text(): string {
    return this.ordered()
      .map((block) => (block.kind === 'text' ? block.text : ''))
      .join('')
  }

  reply(): ChatReply {
    const toolCalls: ToolCall[] = []
    for (const block of this.ordered()) {
      if (block.kind === 'tool') toolCalls.push({ id: block.id, name: block.name, arguments: normaliseJson(block.json) })
    }
    return { text: this.text(), toolCalls, usage: { inputTokens: this.inputTokens, outputTokens: this.outputTokens } }
  }
}

/**
 * Streamed input re-serialised like a plain reply's `JSON.stringify(input)`, so both modes agree;
 * input nested too deeply is dropped before anything serialises it (docs/task-file.md).
 */
const normaliseJson = (json: string): string => {
  if (json.trim() === '') return '{}'
  const bounded = boundArgumentsText(json)
  if (bounded !== json) return bounded
  try {
    return JSON.stringify(JSON.parse(json))
  } catch {
    // Malformed arguments are the model's mistake, fed back to it verbatim by the machine.
    return json
  }
}

const toWire = (options: AnthropicProviderOptions, request: ChatRequest): MessageCreateParamsBase => {
  const system = request.messages.flatMap((message) => (message.role === 'system' ? [message.content] : [])).join('\n\n')
  return {
    model: options.model,
    max_tokens: options.settings?.maxTokens ?? options.maxTokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS,
    ...(options.settings?.temperature !== undefined ? { temperature: options.settings.temperature } : {}),
    ...(options.settings?.topP !== undefined ? { top_p: options.settings.topP } : {}),
    messages: toWireMessages(request.messages),
    ...(system === '' ? {} : { system }),
    ...(request.tools.length > 0 ? { tools: request.tools.map(toWireTool) } : {})
  }
}

/** Anthropic wants tool results as `tool_result` blocks of a user turn, all of one step in one turn. */
const toWireMessages = (messages: ReadonlyArray<ChatMessage>): MessageParam[] => {
  const wire: MessageParam[] = []
  let results: ToolResultBlockParam[] | undefined
  for (const message of messages) {
    if (message.role === 'tool') {
      const block: ToolResultBlockParam = { type: 'tool_result', tool_use_id: message.toolCallId, content: message.content }
      if (results === undefined) {
        results = [block]
        wire.push({ role: 'user', content: results })
      } else {
        results.push(block)
      }
      continue
    }
    results = undefined
    switch (message.role) {
      case 'system':
        break
      case 'user':
        wire.push({ role: 'user', content: message.content })
        break
      case 'assistant': {
        if (message.toolCalls.length === 0) {
          wire.push({ role: 'assistant', content: message.content })
          break
        }
        // The API rejects empty text blocks, so text is only sent when there is some.
        const content: ContentBlockParam[] = message.content === '' ? [] : [{ type: 'text', text: message.content }]
        for (const call of message.toolCalls) {
          content.push({ type: 'tool_use', id: call.id, name: call.name, input: parseInput(call.arguments) })
        }
        wire.push({ role: 'assistant', content })
        break
      }
    }
  }
  return wire
}

/**
 * `tool_use.input` must be an object; a model's malformed arguments are replayed as `{}`, and so
 * are ones nested too deeply for the SDK to serialise (a run stored before that limit existed).
 */
const parseInput = (json: string): Record<string, unknown> => {
  if (jsonTextTooDeep(json, MAX_NESTING_DEPTH)) return {}
  try {
    const value: unknown = JSON.parse(json)
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

const toWireTool = (tool: ToolSpec): Tool => ({
  name: tool.name,
  description: tool.description,
  input_schema: { type: 'object', ...tool.parameters }
})

const fromMessage = (message: Message): ChatReply => {
  let text = ''
  const toolCalls: ToolCall[] = []
  for (const block of message.content) {
    if (block.type === 'text') text += block.text
    if (block.type === 'tool_use') toolCalls.push({ id: block.id, name: block.name, arguments: argumentsTextOf(block.input) })
  }
  return { text, toolCalls, usage: { inputTokens: message.usage.input_tokens, outputTokens: message.usage.output_tokens } }
}

/** Maps whatever the SDK threw to our typed error (docs/cli.md), never echoing the key. */
const toProviderError = (provider: string, error: unknown, secrets: SecretSet): ProviderError => {
  if (error instanceof ProviderError) return error
  if (error instanceof anthropicSdk().APIConnectionTimeoutError) return providerErrorFromConnection(provider, error, { timedOut: true, secrets })
  if (error instanceof anthropicSdk().APIUserAbortError) {
    return new ProviderError({ kind: 'transient', provider, possiblyDelivered: true, message: 'request aborted', cause: error })
  }
  if (error instanceof anthropicSdk().APIConnectionError) return providerErrorFromConnection(provider, error.cause ?? error, { secrets })
  if (error instanceof anthropicSdk().APIError && error.status !== undefined) {
    return providerErrorFromStatus(
      provider,
      {
        status: error.status,
        headers: error.headers,
        // The SDK's own message is the whole JSON body; the API's sentence reads better in a trace.
        message: error.apiMessage === null ? error.message : `${error.status} ${error.apiMessage}`,
        code: error.errorCode ?? error.type,
        cause: error
      },
      secrets
    )
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
