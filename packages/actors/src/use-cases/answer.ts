import { type Database, type DecisionSource, getRunRow, listApprovals, type RunStatus, type StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Kysely } from 'kysely'
import { answerRequest } from '../approval/answer-request.js'
import { AmbiguousRequestError, NothingPendingError, RequestDecidedError, RequestNotFoundError, RunNotFoundError } from '../errors.js'

/** What a question is answered with: the text, and which question when the run has several. */
export interface AnswerInput {
  readonly text: string
  readonly requestId?: string | undefined
}

export interface AnswerOutcome {
  readonly runId: string
  /** The question answered. */
  readonly requestId: string
  readonly question: string
  /** The run's status when answered: a paused run goes on with `resume`. */
  readonly runStatus: RunStatus
  /** Questions of the run still waiting afterwards. */
  readonly pending: number
}

/** Why an answer was not recorded (nothing of it was). */
export type AnswerError = RunNotFoundError | RequestNotFoundError | RequestDecidedError | NothingPendingError | AmbiguousRequestError | StoreError

/**
 * Answers a question a run's model asked (`ask_human`, docs/policy.md, "Questions"): the one
 * `requestId` names, or the run's only one. The first answer wins. This is `agentvisor answer`,
 * NATS `control.<run>.answer` and `Agentvisor.answer`: they differ only in `source`. The run goes
 * on with `resume`, the answer being the call's result.
 */
export const answerRun = (
  deps: { readonly db: Kysely<Database>; readonly source: DecisionSource },
  runId: string,
  input: AnswerInput
): Effect.Effect<AnswerOutcome, AnswerError> =>
  Effect.gen(function* () {
    const { db } = deps
    const run = yield* getRunRow(db, runId)
    if (run === undefined) return yield* new RunNotFoundError({ runId })
    const requests = yield* listApprovals(db, runId)
    const questions = requests.filter((r) => r.kind === 'input')
    const open = questions.filter((r) => r.status === 'pending')
    let chosen = open[0]
    if (input.requestId !== undefined) {
      const named = questions.find((r) => r.id === input.requestId)
      if (named === undefined) return yield* new RequestNotFoundError({ runId, requestId: input.requestId })
      if (named.status !== 'pending') return yield* new RequestDecidedError({ requestId: named.id, status: 'answered' })
      chosen = named
    } else if (open.length > 1) return yield* new AmbiguousRequestError({ runId, what: 'answer', count: open.length })
    if (chosen === undefined) return yield* new NothingPendingError({ runId, kind: 'input' })
    yield* answerRequest(db, chosen.id, input.text, deps.source, new Date().toISOString())
    return { runId, requestId: chosen.id, question: chosen.target, runStatus: run.status, pending: open.length - 1 }
  })
