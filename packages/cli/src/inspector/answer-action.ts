import { type AnswerError, answerRun } from '@agentvisor/actors'
import { StoreError } from '@agentvisor/store'
import { Cause, Effect, Exit } from 'effect'
import type { DecisionDeps } from './approval-action.js'
import { HttpError } from './http.js'

/** The body of `POST /api/runs/:id/answers/:requestId`: the answer to a question (`ask_human`). */
export interface AnswerBody {
  readonly text: string
}

/** Validates the body; anything else is a 400 naming the field. */
export const parseAnswerBody = (body: unknown): AnswerBody => {
  const text = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)['text'] : undefined
  if (typeof text !== 'string' || text.trim() === '') throw new HttpError({ status: 400, message: 'the body must be {"text": "the answer"}, text not empty' })
  return { text }
}

/** What an answer led to. */
export interface AnswerOutcome {
  readonly requestId: string
  /** Whether this was the run's last open question and the inspector now drives the run on. */
  readonly resumed: boolean
  /** Questions of the run still waiting. */
  readonly pending: number
  readonly note?: string
}

/**
 * Answers one question of a run (docs/policy.md, "Questions"), recorded like `agentvisor answer`
 * (source `cli`). When it was the run's last open question, the paused run is driven on here.
 */
export const answerFromInspector = async (deps: DecisionDeps, runId: string, requestId: string, body: AnswerBody): Promise<AnswerOutcome> => {
  const exit = await Effect.runPromiseExit(answerRun({ db: deps.db, source: 'inspector' }, runId, { text: body.text, requestId }))
  if (Exit.isFailure(exit)) {
    const error = Cause.squash(exit.cause) as AnswerError
    if (error instanceof StoreError) throw error
    throw new HttpError({ status: error._tag === 'RunNotFoundError' || error._tag === 'RequestNotFoundError' ? 404 : 409, message: error.message })
  }
  const { runStatus, pending } = exit.value
  if (pending > 0) return { requestId, resumed: false, pending, note: `the run waits for ${pending} more answer${pending === 1 ? '' : 's'}` }
  if (runStatus !== 'awaiting_input') return { requestId, resumed: false, pending, note: `the run is ${runStatus}, not paused` }
  try {
    await deps.drive(runId)
    return { requestId, resumed: true, pending }
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error)
    return { requestId, resumed: false, pending, note: `answered, but the run was not resumed here: ${message}` }
  }
}
