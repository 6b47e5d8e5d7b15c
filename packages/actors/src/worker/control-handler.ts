import { type Database, getRunRow, listRunTree, toRunRecord } from '@agentvisor/store'
import { Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import type { ControlHandler } from '../protocol/bus.js'
import { failureReason, storeFailureReason } from '../bus/control-answer.js'
import { type AnswerBody, type ApproveBody, controlError, parseControlBody, PROTOCOL_VERSION } from '../protocol/messages.js'
import { RunNotFoundError } from '../errors.js'
import { answerRun } from '../use-cases/answer.js'
import { type ApproveAnswer, type ApproveError, approveRun } from '../use-cases/approve.js'
import { pendingRequests } from '../use-cases/pending.js'
import { requestRunCancel } from '../io/run-cancel.js'
import type { LogLine } from '../loop/survive.js'

export interface ControlDeps {
  readonly db: Kysely<Database>
  /** Drives a run nobody drives (to finish a cancel, or go on after an approval), in the background. */
  readonly drive: (runId: string) => void
  /** Where the cause of a store failure goes (a reply only says that the store failed). */
  readonly log: LogLine
}

/** A NATS approve body as the use case's answer: a deny carries no edit (docs/nats.md). */
const answerOf = (body: ApproveBody): ApproveAnswer =>
  body.decision === 'approve'
    ? { requestId: body.requestId, decision: 'approve', remember: body.remember, edit: body.edit }
    : { requestId: body.requestId, decision: 'deny', remember: body.remember }

/** The `{ok: false, error}` text of a refused approve: a named request that is not pending reads as such. */
const approveRefusal = (runId: string, error: ApproveError, log: LogLine): string => {
  switch (error._tag) {
    case 'RequestNotFoundError':
    case 'RequestDecidedError':
      return `run ${runId} has no pending request ${error.requestId}`
    case 'StoreError':
      return storeFailureReason(`cannot approve run ${runId}`, error, log)
    default:
      return error.message
  }
}

/**
 * The control API of docs/nats.md over the store, through the use cases every adapter shares
 * (`use-cases/`): `status` reads the run, `cancel` records the request (the run's driver,
 * wherever it is, acts on it; a run nobody drives is driven here to its end), `approve` decides
 * pending requests (source `nats`) and drives the run on. Whatever arrives is answered; nothing
 * here throws.
 */
export const makeControlHandler =
  (deps: ControlDeps): ControlHandler =>
  (runId, verb, body) =>
    Effect.gen(function* () {
      const parsed = parseControlBody(verb, body)
      if (Either.isLeft(parsed)) return controlError(parsed.left)
      if (verb === 'status') {
        const run = yield* getRunRow(deps.db, runId)
        if (run === undefined) return controlError(new RunNotFoundError({ runId }).message)
        return { v: PROTOCOL_VERSION, ok: true as const, ...toRunRecord(run) }
      }
      if (verb === 'cancel') {
        const requested = yield* Effect.either(requestRunCancel(deps.db, runId))
        if (Either.isLeft(requested)) {
          const error = requested.left
          return controlError(error._tag === 'StoreError' ? storeFailureReason(`cannot cancel run ${runId}`, error, deps.log) : error.message)
        }
        if (requested.right.alreadyEnded) return { v: PROTOCOL_VERSION, ok: true as const, status: requested.right.status }
        if (requested.right.undriven) deps.drive(runId)
        return { v: PROTOCOL_VERSION, ok: true as const }
      }
      if (verb === 'tree') {
        const rows = yield* listRunTree(deps.db, runId)
        if (rows.length === 0) return controlError(new RunNotFoundError({ runId }).message)
        return { v: PROTOCOL_VERSION, ok: true as const, runs: rows.map(toRunRecord) }
      }
      if (verb === 'pending') {
        const pending = yield* Effect.either(pendingRequests(deps.db, runId))
        if (Either.isLeft(pending)) {
          const error = pending.left
          return controlError(error._tag === 'StoreError' ? storeFailureReason(`cannot list the requests of run ${runId}`, error, deps.log) : error.message)
        }
        return { v: PROTOCOL_VERSION, ok: true as const, requests: pending.right }
      }
      if (verb === 'answer') {
        const { text, requestId } = parsed.right as AnswerBody
        const answered = yield* Effect.either(answerRun({ db: deps.db, source: 'nats' }, runId, { text, requestId }))
        if (Either.isLeft(answered)) {
          const error = answered.left
          return controlError(error._tag === 'StoreError' ? storeFailureReason(`cannot answer run ${runId}`, error, deps.log) : error.message)
        }
        // Like an approval: a paused run is driven on here, the answer being its call's result.
        if (answered.right.pending === 0) deps.drive(runId)
        return { v: PROTOCOL_VERSION, ok: true as const, answered: answered.right.requestId }
      }
      const approved = yield* Effect.either(approveRun({ db: deps.db, source: 'nats' }, runId, answerOf(parsed.right as ApproveBody)))
      if (Either.isLeft(approved)) return controlError(approveRefusal(runId, approved.left, deps.log))
      deps.drive(runId)
      return { v: PROTOCOL_VERSION, ok: true as const, decided: approved.right.decided.map((r) => r.id) }
    }).pipe(
      // A store that fails is said without its own words (SQL, constraint names): those are logged.
      Effect.catchAllCause((cause) => Effect.succeed(controlError(failureReason(`cannot ${verb} run ${runId}`, cause, deps.log))))
    )
