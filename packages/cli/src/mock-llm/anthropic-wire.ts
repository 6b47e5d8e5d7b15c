import type { MockAnswer } from './answer.js'
import { firstHalf, jsonEvent, splitInPieces, type SseEvent } from './sse.js'

/** The Anthropic Messages rendering of scripted answers and errors. */

type Block = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown }

const blocksOf = (answer: MockAnswer): Block[] => [
  ...(answer.text === '' && answer.toolCalls.length > 0 ? [] : [{ type: 'text' as const, text: answer.text }]),
  ...answer.toolCalls.map((call) => ({ type: 'tool_use' as const, id: call.id, name: call.name, input: parseInput(call.arguments) }))
]

// tool_use.input is an object on this API; scripted malformed arguments have no faithful form here.
const parseInput = (json: string): unknown => {
  try {
    return JSON.parse(json)
  } catch {
    return {}
  }
}

const usageOf = (answer: MockAnswer) => ({
  input_tokens: answer.usage.inputTokens,
  output_tokens: answer.usage.outputTokens,
  cache_creation_input_tokens: null,
  cache_read_input_tokens: null
})

const stopReason = (answer: MockAnswer): string => (answer.toolCalls.length > 0 ? 'tool_use' : 'end_turn')

/** A non-streamed `message` object. */
export const anthropicMessage = (answer: MockAnswer, model: string, id: string): unknown => ({
  id,
  type: 'message',
  role: 'assistant',
  model,
  content: blocksOf(answer),
  stop_reason: stopReason(answer),
  stop_sequence: null,
  usage: usageOf(answer)
})

/**
 * A streamed answer as Anthropic's named events: `message_start`, a `ping`, per block
 * `content_block_start` / deltas (`text_delta`, `input_json_delta` in pieces) / `content_block_stop`,
 * `message_delta` with the stop reason and usage, `message_stop`. With `cut`, only the first part.
 */
export const anthropicStreamEvents = (answer: MockAnswer, model: string, id: string, options: { readonly cut: boolean }): SseEvent[] => {
  const event = (type: string, data: Record<string, unknown>): SseEvent => jsonEvent({ type, ...data }, type)
  const events: SseEvent[] = [
    event('message_start', {
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usageOf(answer), output_tokens: 1 }
      }
    }),
    event('ping', {})
  ]
  const blocks = blocksOf(answer)
  for (const [index, block] of blocks.entries()) {
    if (block.type === 'text') {
      events.push(event('content_block_start', { index, content_block: { type: 'text', text: '' } }))
      const pieces = options.cut ? [firstHalf(block.text)] : splitInPieces(block.text)
      for (const text of pieces) events.push(event('content_block_delta', { index, delta: { type: 'text_delta', text } }))
    } else {
      events.push(event('content_block_start', { index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } }))
      const json = JSON.stringify(block.input)
      const pieces = options.cut ? [firstHalf(json)] : splitInPieces(json)
      for (const partial_json of pieces) events.push(event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json } }))
    }
    if (options.cut) return events
    events.push(event('content_block_stop', { index }))
  }
  events.push(
    event('message_delta', { delta: { stop_reason: stopReason(answer), stop_sequence: null }, usage: { output_tokens: answer.usage.outputTokens } }),
    event('message_stop', {})
  )
  return events
}

const errorType = (status: number): string => {
  if (status === 400) return 'invalid_request_error'
  if (status === 401) return 'authentication_error'
  if (status === 403) return 'permission_error'
  if (status === 404) return 'not_found_error'
  if (status === 413) return 'request_too_large'
  if (status === 429) return 'rate_limit_error'
  if (status === 529) return 'overloaded_error'
  if (status >= 500) return 'api_error'
  return 'invalid_request_error'
}

/** The body Anthropic sends with an error status. */
export const anthropicErrorBody = (status: number, message: string): unknown => ({
  type: 'error',
  error: { type: errorType(status), message }
})
