import { Either } from 'effect'
import { decodeArgumentsObject } from './tool-arguments.js'
import type { CallableTool } from './tool-definition.js'
import { failed } from './tool-outcome.js'

/** The tool a model asks a person a question with (docs/policy.md, "Questions"). */
export const ASK_HUMAN = 'ask_human'

/** `ask_human`'s arguments. */
export interface AskHumanArgs {
  readonly question: string
}

/** The longest question stored and shown: a model that writes more is cut there. */
export const MAX_QUESTION_LENGTH = 4000

/**
 * `ask_human {question}`: pauses the run until a person answers; the answer is the call's result.
 * The driver answers it from the run's requests (approval/step-plan.ts), never by running it: it
 * acts on nothing, so it is `read` and not judged by the policy. Offered only to an agent whose
 * `tools` name it (it is not one of the first edition's built-ins).
 */
export const askHumanDefinition: CallableTool<AskHumanArgs> = {
  name: ASK_HUMAN,
  source: 'builtin',
  spec: {
    name: ASK_HUMAN,
    description:
      "Ask a person a question and wait for their answer, which is this call's result. Use it when you cannot go on without a decision or a fact only a person has; ask one clear question.",
    parameters: { type: 'object', properties: { question: { type: 'string', description: 'The question, complete in itself.' } }, required: ['question'] }
  },
  effect: 'read',
  runsAs: 'call',
  decode: decodeAskHumanArgs,
  policy: () => undefined,
  run: () => failed('ask_human is answered by a person, not run')
}

/** The question of an `ask_human` call, or why its arguments are not one. */
export function decodeAskHumanArgs(raw: string): Either.Either<AskHumanArgs, string> {
  return Either.flatMap(decodeArgumentsObject(raw), (fields) => {
    const question = fields['question']
    if (typeof question !== 'string' || question.trim() === '') return Either.left('"question" must be a non-empty string')
    return Either.right({ question: question.length > MAX_QUESTION_LENGTH ? question.slice(0, MAX_QUESTION_LENGTH) : question })
  })
}
