import type { ChatReply, Provider } from '@agentvisor/core'
import type { StepRow } from '@agentvisor/store'
import { Effect, Exit } from 'effect'

/** The name of the one provider a replay's run has (docs/replay.md). */
export const RECORDED_PROVIDER = 'recorded'

/** Why a replay stopped asking for answers before its run ended on its own. */
export interface ReplayStop {
  /** The step whose answer was not played. */
  readonly step: number
  readonly reason: 'end-of-record' | 'children'
}

/**
 * A provider that plays a stored run's answers in order, one a dispatch (docs/replay.md): the
 * text, the tool calls (their ids and raw arguments as recorded) and the tokens they cost. It
 * stops, calling `stop` and never answering, when asked past the record, or for an answer that
 * started children (a child run is replayed on its own): the replay then cancels its run.
 */
export const recordedProvider = (steps: ReadonlyArray<StepRow>, stop: (why: ReplayStop) => void): Provider => {
  let dispatches = 0
  return {
    name: RECORDED_PROVIDER,
    kind: 'scripted',
    chat: (request) => {
      const index = dispatches++
      const step = steps[index]
      if (step === undefined || step.tool_calls.some((call) => call.name === 'spawn_child')) {
        stop({ step: index + 1, reason: step === undefined ? 'end-of-record' : 'children' })
        return Effect.never
      }
      const reply: ChatReply = {
        text: step.text,
        toolCalls: step.tool_calls,
        usage: { inputTokens: step.tokens_in, outputTokens: step.tokens_out }
      }
      if (request.onText !== undefined && reply.text !== '') request.onText(reply.text)
      return Exit.succeed(reply)
    }
  }
}
