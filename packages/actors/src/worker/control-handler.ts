import type { TaskContract } from '@agentvisor/core'
import { type Database, getRun, isFinalStatus, isInterrupted, listApprovals, requestCancel, toRunRecord } from '@agentvisor/store'
import { Cause, Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import { decideRequest } from '../approval/decide.js'
import { loadRunPolicy } from '../approval/run-policy.js'
import type { ControlHandler } from '../bus/bus.js'
import { type ApproveBody, controlError, parseControlBody, PROTOCOL_VERSION } from '../bus/messages.js'


export interface ControlDeps {
  readonly db: Kysely<Database>
  /** Drives a run nobody drives (to finish a cancel, or go on after an approval), in the background. */
  readonly drive: (runId: string) => void
}

/**
 * The control API of docs/nats.md over the store: `status` reads the run, `cancel` records
 * the request (the run's driver, wherever it is, acts on it), `approve` decides pending
 * requests (source `nats`). Whatever arrives is answered; nothing here throws.
 */
export const makeControlHandler =
  (deps: ControlDeps): ControlHandler =>
  (runId, verb, body) =>
    Effect.gen(function* () {
      const parsed = parseControlBody(verb, body)
      if (Either.isLeft(parsed)) return controlError(parsed.left)
      const run = yield* Effect.promise(() => getRun(deps.db, runId))
      if (run === undefined) return controlError(`no run with id ${runId}`)
      if (verb === 'status') return { v: PROTOCOL_VERSION, ok: true as const, ...toRunRecord(run) }
      if (verb === 'cancel') {
        if (isFinalStatus(run.status)) return { v: PROTOCOL_VERSION, ok: true as const, status: run.status }
        yield* Effect.promise(() => requestCancel(deps.db, runId, new Date().toISOString()))
        if (run.status === 'awaiting_approval' || isInterrupted(run, Date.now())) deps.drive(runId)
        return { v: PROTOCOL_VERSION, ok: true as const }
      }
      const approve = parsed.right as ApproveBody
      const pending = (yield* Effect.promise(() => listApprovals(deps.db, runId))).filter(
        (r) => r.status === 'pending' && r.kind === 'policy' && (approve.requestId === undefined || r.id === approve.requestId)
      )
      if (pending.length === 0) return controlError(approve.requestId === undefined ? `run ${runId} has no pending approval requests` : `run ${runId} has no pending request ${approve.requestId}`)
      const contract = JSON.parse(run.contract_json) as TaskContract
      const policy = yield* Effect.promise(() => loadRunPolicy(deps.db, contract))
      if (Either.isLeft(policy)) return controlError(`run ${runId}: ${policy.left}`)
      for (const request of pending) {
        yield* Effect.tryPromise(() =>
          decideRequest({
            db: deps.db,
            policy: policy.right,
            workspace: contract.workspace,
            request,
            answer: { decision: approve.decision, remember: approve.remember, edit: approve.edit },
            source: 'nats',
            at: new Date().toISOString()
          })
        )
      }
      deps.drive(runId)
      return { v: PROTOCOL_VERSION, ok: true as const, decided: pending.map((r) => r.id) }
    }).pipe(
      Effect.catchAllCause((cause) => Effect.succeed(controlError(`cannot ${verb} run ${runId}: ${causeMessage(cause)}`)))
    )

const causeMessage = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  const text = error instanceof Error ? error.message : String(error)
  return (text.split('\n')[0] ?? 'internal error').slice(0, 300)
}
