import type { ChatMessage } from '@agentvisor/core'
import type { LeaseLostError, StoreError } from '@agentvisor/store'
import type { Effect } from 'effect'
import type { TransitionJournal } from './transition-journal.js'

/**
 * Begins a new turn of a finished run (docs/policy.md, "Follow-ups"): `text` joins the
 * conversation as the user's message after the last step, stored as that step's feedback (after
 * any it had) so a resume rebuilds the same conversation, in the commit of `FOLLOW_UP`.
 */
export const beginFollowUp = (
  journal: TransitionJournal,
  messages: ChatMessage[],
  runId: string,
  text: string,
  at: number
): Effect.Effect<void, StoreError | LeaseLostError> => {
  const step = journal.context().completedSteps
  const last = messages[messages.length - 1]
  // The last step's feedback, when the conversation ends with it: the follow-up is added to it.
  const feedback = last?.role === 'user' && messages.length > 2 ? last.content : undefined
  const combined = feedback === undefined ? text : `${feedback}\n\n${text}`
  return journal.commit({
    // The message rides in the event too: the journal keeps it whole, for the trace's turns.
    event: { type: 'FOLLOW_UP', at, text },
    writes: [{ op: 'setStepFeedback', runId, step, feedback: combined }],
    after: () => {
      if (feedback === undefined) messages.push({ role: 'user', content: text })
      else messages[messages.length - 1] = { role: 'user', content: combined }
    }
  })
}
