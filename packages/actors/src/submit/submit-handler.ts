import type { RunError, TaskContract } from '@agentvisor/core'
import { type Database, insertRunOnce, newRunId, RunCreation, updateRun } from '@agentvisor/store'
import { Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import type { Bus, SubmitHandler } from '../protocol/bus.js'
import { failureReason } from '../bus/control-answer.js'
import { type ControlReply, controlError, parseSubmitBody, PROTOCOL_VERSION } from '../protocol/messages.js'
import { childRunRow } from '../protocol/child-contract.js'
import { oneLine } from '../loop/one-line.js'
import { narrowSubmission } from './submitted-contract.js'

export interface SubmitDeps {
  readonly db: Kysely<Database>
  readonly bus: Bus
  /** What every submitted run is laid over and may never do more than (docs/nats.md, "Submitting runs"). */
  readonly template: TaskContract
  readonly log: (line: string) => void
}

const accepted = (runId: string): ControlReply => ({ v: PROTOCOL_VERSION, ok: true, runId })

/**
 * Takes a root run submitted on `agentvisor.runs.submit` (docs/nats.md, "Submitting runs"): the
 * body is checked, the task laid over the worker's submit template and refused, naming the
 * field, if it asks for more; the run's row is written, then its request queued on the work
 * queue children use, for any worker to drive. Submitting the same `runId` with the same task
 * again is answered as the first time (a client that lost the reply can send it again); another
 * task under a taken id is refused. Nothing here throws: every outcome is a reply.
 */
export const makeSubmitHandler =
  (deps: SubmitDeps): SubmitHandler =>
  (body) => {
    // Every refusal is one line of the worker's log as well as the reply (docs/nats.md).
    const refuse = (reason: string): ControlReply => {
      deps.log(`refused a submitted run: ${oneLine(reason, 500)}`)
      return controlError(reason)
    }
    return Effect.gen(function* () {
      const parsed = parseSubmitBody(body)
      if (Either.isLeft(parsed)) return refuse(parsed.left)
      const { runId = newRunId(), traceparent } = parsed.right
      const narrowed = narrowSubmission(deps.template, parsed.right.contract)
      if (Either.isLeft(narrowed)) return refuse(narrowed.left)
      const contract = narrowed.right
      // One insert that gives way on the key: of identical submissions in flight at once, one
      // creates the row and the others find the very same run, so each is answered as the first.
      const creation = yield* insertRunOnce(deps.db, childRunRow(runId, null, contract, new Date().toISOString()))
      if (creation === RunCreation.differs) {
        return refuse(`runId: run ${runId} exists already (submit a new id, or the very same task to be told it was taken)`)
      }
      const created = creation === RunCreation.created
      // Queued again for a repeated submission too: one whose queueing failed the first time gets
      // it now, and the queue drops a duplicate of one still queued.
      const queued = yield* Effect.either(
        deps.bus.submitChild({ v: PROTOCOL_VERSION, runId, parentId: null, contract, ...(traceparent !== undefined ? { traceparent } : {}) })
      )
      if (Either.isLeft(queued)) {
        const reason = `cannot queue run ${runId}: ${oneLine(queued.left.message, 300)}`
        deps.log(reason)
        if (created) yield* endUnqueued(deps.db, runId, reason)
        return controlError(reason)
      }
      if (created) deps.log(`queued submitted run ${runId}`)
      return accepted(runId)
    }).pipe(
      // A store that fails is said without its own words (SQL, constraint names): those are logged.
      Effect.catchAllCause((cause) => Effect.succeed(controlError(failureReason('cannot take the submitted run', cause, deps.log))))
    )
  }

/** A run whose request never reached the queue ends `failed` with why, rather than waiting for a driver forever. */
const endUnqueued = (db: Kysely<Database>, runId: string, message: string) => {
  const at = new Date().toISOString()
  const error: RunError = { kind: 'internal', message }
  return updateRun(db, runId, { status: 'failed', state: 'finished.failed', error_json: JSON.stringify(error), ended_at: at, updated_at: at })
}
