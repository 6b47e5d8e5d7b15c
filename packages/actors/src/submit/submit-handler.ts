import type { RunError, TaskContract } from '@agentvisor/core'
import { type Database, getRun, insertRun, newRunId, updateRun } from '@agentvisor/store'
import { Cause, Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import type { Bus, SubmitHandler } from '../bus/bus.js'
import { type ControlReply, controlError, parseSubmitBody, PROTOCOL_VERSION } from '../bus/messages.js'
import { childRunRow, same } from '../children/child-contract.js'
import { oneLine } from '../loop/one-line.js'
import { query } from '../use-cases/store-query.js'
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
  (body) =>
    Effect.gen(function* () {
      const parsed = parseSubmitBody(body)
      if (Either.isLeft(parsed)) return controlError(parsed.left)
      const { runId = newRunId(), traceparent } = parsed.right
      const narrowed = narrowSubmission(deps.template, parsed.right.contract)
      if (Either.isLeft(narrowed)) {
        deps.log(`refused a submitted run: ${oneLine(narrowed.left, 500)}`)
        return controlError(narrowed.left)
      }
      const contract = narrowed.right
      const existing = yield* query(`load run ${runId}`, () => getRun(deps.db, runId))
      if (existing !== undefined) {
        const again = existing.parent_id === null && same(existing.contract, contract)
        if (!again) return controlError(`runId: run ${runId} exists already (submit a new id, or the very same task to be told it was taken)`)
      } else {
        yield* query(`create run ${runId}`, () => insertRun(deps.db, childRunRow(runId, null, contract, new Date().toISOString())))
      }
      // Queued again for a repeated submission too: one whose queueing failed the first time gets
      // it now, and the queue drops a duplicate of one still queued.
      const queued = yield* Effect.either(
        deps.bus.submitChild({ v: PROTOCOL_VERSION, runId, parentId: null, contract, ...(traceparent !== undefined ? { traceparent } : {}) })
      )
      if (Either.isLeft(queued)) {
        const reason = `cannot queue run ${runId}: ${oneLine(queued.left.message, 300)}`
        deps.log(reason)
        if (existing === undefined) yield* endUnqueued(deps.db, runId, reason)
        return controlError(reason)
      }
      if (existing === undefined) deps.log(`queued submitted run ${runId}`)
      return accepted(runId)
    }).pipe(
      Effect.catchAllCause((cause) => {
        const error = Cause.squash(cause)
        const reason = oneLine(error instanceof Error ? error.message : String(error), 300)
        deps.log(`a submitted run cannot be taken: ${reason}`)
        return Effect.succeed(controlError(`cannot take the run: ${reason}`))
      })
    )

/** A run whose request never reached the queue ends `failed` with why, rather than waiting for a driver forever. */
const endUnqueued = (db: Kysely<Database>, runId: string, message: string) => {
  const at = new Date().toISOString()
  const error: RunError = { kind: 'internal', message }
  return query(`end run ${runId}`, () =>
    updateRun(db, runId, { status: 'failed', state: 'finished.failed', error_json: JSON.stringify(error), ended_at: at, updated_at: at })
  )
}
