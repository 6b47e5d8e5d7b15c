import type { ChatReply, Provider } from '@agentvisor/core'
import type { StepRow } from '@agentvisor/store'
import { Effect, Exit } from 'effect'

/** The name of the one provider a replay's run has (docs/replay.md). */
export const RECORDED_PROVIDER = 'recorded'

/** Why a replay stopped asking for answers before its run (or its turn) ended on its own. */
export interface ReplayStop {
  /** The step whose answer was not played. */
  readonly step: number
  /** `end-of-turn`: asked past the last step of the turn being replayed (of the record, for its last turn). */
  readonly reason: 'end-of-turn' | 'children'
}

/** The recorded provider of one replay, and how far into the record the turn being replayed may go. */
export interface RecordedProvider extends Provider {
  /** Lets the run be answered up to `step` (the last step of the turn about to be replayed), and no further. */
  readonly playThrough: (step: number) => void
}

/**
 * A provider that plays a stored run's answers (docs/replay.md): the text, the tool calls (their
 * ids and raw arguments as recorded) and the tokens they cost of the record's step the replay's
 * run is at. It stops, calling `stop` and never answering, when asked past the turn being
 * replayed, or for an answer that started children (a child run is replayed on its own): the
 * replay then cancels its run.
 */
export const recordedProvider = (steps: ReadonlyArray<StepRow>, stop: (why: ReplayStop) => void): RecordedProvider => {
  let dispatches = 0
  let through = 0
  return {
    name: RECORDED_PROVIDER,
    kind: 'scripted',
    playThrough: (step) => {
      through = step
    },
    chat: (request) => {
      // The step the replay's run is at (its driver says): a record's steps are numbered as the replay's.
      const number = request.step ?? dispatches + 1
      dispatches++
      const step = number <= through ? steps[number - 1] : undefined
      if (step === undefined || step.tool_calls.some((call) => call.name === 'spawn_child')) {
        stop({ step: number, reason: step === undefined ? 'end-of-turn' : 'children' })
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
