import { Effect, Exit } from 'effect'
import { ProviderError } from '../errors.js'
import { argumentsTextOf, boundArgumentsText } from '../tools/tool-arguments.js'
import { kindOfStatus } from './http-error.js'
import type { ChatReply, Provider, ToolCall } from './provider.js'
import { SCRIPT_EXHAUSTED_TEXT, type ScriptedStep } from './scripted-step.js'

export interface ScriptedProviderOptions {
  readonly name?: string
  readonly steps: ReadonlyArray<ScriptedStep>
  /** `false`: answers come whole, as from a provider that does not stream (default: a word at a time to `onText`). */
  readonly stream?: boolean | undefined
}

/** A scripted provider also tells how often it was asked and what it was last sent (for tests). */
export interface ScriptedProvider extends Provider {
  readonly callCount: () => number
  /** The last request, or undefined before the first (only the last: a long run keeps no history here). */
  readonly lastRequest: () => Parameters<Provider['chat']>[0] | undefined
}

/**
 * Plays `steps` in order, one per dispatch of this provider, then answers plain text. Errors and
 * disconnects fail like their HTTP counterparts would, so the machine cannot tell a script from a
 * server. Its position is the run's: a request that says how many calls the run made to it
 * before (`request.dispatch`, from the run's receipts) gets the step at that index, so a run
 * paused and resumed in another process plays its next step, not its first again
 * (docs/task-file.md, "Providers"). A request without it (a test calling `chat` itself) gets the
 * next step of this object's own count.
 */
export const makeScriptedProvider = (options: ScriptedProviderOptions): ScriptedProvider => {
  const name = options.name ?? 'scripted'
  let count = 0
  let last: { readonly request: Parameters<Provider['chat']>[0]; readonly length: number } | undefined
  return {
    name,
    kind: 'scripted',
    callCount: () => count,
    // The conversation as it was sent: the caller may append to the array afterwards.
    lastRequest: () => (last === undefined ? undefined : { ...last.request, messages: last.request.messages.slice(0, last.length) }),
    // Played when asked: a step without a delay is answered at once, as a settled Exit (a
    // driver need not wait for it); a delayed one sleeps first.
    chat: (request) => {
      const index = request.dispatch ?? count
      count += 1
      last = { request, length: request.messages.length }
      const step = options.steps[index]
      const answer = step === undefined ? Exit.succeed(textReply(SCRIPT_EXHAUSTED_TEXT)) : playStep(name, index, step)
      const onText = options.stream === false ? undefined : request.onText
      if (!step?.delayMs) {
        if (onText !== undefined) streamText(answer, onText)
        return answer
      }
      return Effect.zipRight(
        Effect.sleep(step.delayMs),
        Effect.suspend(() => {
          if (onText !== undefined) streamText(answer, onText)
          return answer
        })
      )
    }
  }
}

const textReply = (text: string): ChatReply => ({ text, toolCalls: [] })

/** A succeeded answer's text handed to `onText` in pieces of a word each, as a stream would. */
const streamText = (answer: Exit.Exit<ChatReply, ProviderError>, onText: (delta: string) => void): void => {
  if (!Exit.isSuccess(answer)) return
  for (const piece of answer.value.text.match(/\S+\s*|\s+/g) ?? []) onText(piece)
}

const playStep = (provider: string, index: number, step: ScriptedStep): Exit.Exit<ChatReply, ProviderError> => {
  if (step.error !== undefined) {
    const { status, retryAfterMs, message } = step.error
    return Exit.fail(
      new ProviderError({
        kind: kindOfStatus(status),
        provider,
        httpStatus: status,
        retryAfterMs,
        message: message ?? `scripted HTTP ${status}`
      })
    )
  }
  if (step.disconnect === true) {
    return Exit.fail(new ProviderError({ kind: 'transient', provider, possiblyDelivered: true, message: 'connection reset by scripted provider' }))
  }
  const toolCalls: ToolCall[] = (step.toolCalls ?? []).map((call, i) => ({
    id: `call_${index + 1}_${i + 1}`,
    name: call.name,
    // Bounded like a real adapter's decoding, so a script exercises the same path (docs/task-file.md).
    arguments: typeof call.arguments === 'string' ? boundArgumentsText(call.arguments) : argumentsTextOf(call.arguments)
  }))
  return Exit.succeed({
    text: step.text ?? '',
    toolCalls,
    usage: step.usage ?? { inputTokens: 0, outputTokens: 0 }
  })
}
