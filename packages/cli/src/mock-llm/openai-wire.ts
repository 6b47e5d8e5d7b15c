import type { MockAnswer } from './answer.js'
import { firstHalf, jsonEvent, splitInPieces, type SseEvent } from './sse.js'

/** The OpenAI chat-completions rendering of scripted answers and errors. */

const created = (): number => Math.floor(Date.now() / 1000)

/** A non-streamed `chat.completion` object. */
export const openAiCompletion = (answer: MockAnswer, model: string, id: string): unknown => ({
  id,
  object: 'chat.completion',
  created: created(),
  model,
  choices: [
    {
      index: 0,
      message: {
        role: 'assistant',
        content: answer.toolCalls.length > 0 && answer.text === '' ? null : answer.text,
        refusal: null,
        ...(answer.toolCalls.length > 0
          ? {
              tool_calls: answer.toolCalls.map((call) => ({
                id: call.id,
                type: 'function',
                function: { name: call.name, arguments: call.arguments }
              }))
            }
          : {})
      },
      logprobs: null,
      finish_reason: answer.toolCalls.length > 0 ? 'tool_calls' : 'stop'
    }
  ],
  usage: usageOf(answer)
})

const usageOf = (answer: MockAnswer) => ({
  prompt_tokens: answer.usage.inputTokens,
  completion_tokens: answer.usage.outputTokens,
  total_tokens: answer.usage.inputTokens + answer.usage.outputTokens
})

/**
 * A streamed answer as `chat.completion.chunk` events, the way OpenAI sends them: text in several
 * deltas; each tool call's id and name in its first delta, its arguments in later pieces keyed by
 * `index`; the finish reason; usage when asked for; `[DONE]`. With `cut`, only the first part (half
 * the text, or the first tool call's header and half its arguments) for a scripted disconnect.
 */
export const openAiStreamEvents = (
  answer: MockAnswer,
  model: string,
  id: string,
  options: { readonly includeUsage: boolean; readonly cut: boolean }
): SseEvent[] => {
  const stamp = created()
  const chunk = (delta: unknown, finishReason: string | null = null): SseEvent =>
    jsonEvent({ id, object: 'chat.completion.chunk', created: stamp, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] })
  const events: SseEvent[] = [chunk({ role: 'assistant', content: '' })]

  if (options.cut) {
    const first = answer.toolCalls[0]
    if (answer.text !== '' || first === undefined) {
      if (answer.text !== '') events.push(chunk({ content: firstHalf(answer.text) }))
    } else {
      events.push(chunk({ tool_calls: [{ index: 0, id: first.id, type: 'function', function: { name: first.name, arguments: firstHalf(first.arguments) } }] }))
    }
    return events
  }

  for (const piece of splitInPieces(answer.text)) events.push(chunk({ content: piece }))
  answer.toolCalls.forEach((call, index) => {
    events.push(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }))
    for (const piece of splitInPieces(call.arguments)) events.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
  })
  events.push(chunk({}, answer.toolCalls.length > 0 ? 'tool_calls' : 'stop'))
  if (options.includeUsage) {
    events.push(jsonEvent({ id, object: 'chat.completion.chunk', created: stamp, model, choices: [], usage: usageOf(answer) }))
  }
  events.push({ data: '[DONE]' })
  return events
}

const errorShape = (status: number): { type: string; code: string | null } => {
  if (status === 401) return { type: 'invalid_request_error', code: 'invalid_api_key' }
  if (status === 403) return { type: 'invalid_request_error', code: 'unsupported_country_region_territory' }
  if (status === 404) return { type: 'invalid_request_error', code: 'model_not_found' }
  if (status === 429) return { type: 'requests', code: 'rate_limit_exceeded' }
  if (status >= 500) return { type: 'server_error', code: null }
  return { type: 'invalid_request_error', code: null }
}

/** The body OpenAI sends with an error status. */
export const openAiErrorBody = (status: number, message: string): unknown => ({
  error: { message, param: null, ...errorShape(status) }
})
