import { parseChildContract, type RunError, type TaskContract, WorkspaceError } from '@agentvisor/core'
import { type Database, getRun, insertRun, isFinalStatus, LeaseConflictError, updateRun } from '@agentvisor/store'
import { Duration, Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import type { ChildDelivery } from '../bus/bus.js'
import { childRunRow } from '../children/child-contract.js'
import { isOwnedByThisProcess } from '../supervisor/lease.js'
import type { RunHandle, RunResult } from '../supervisor/supervisor.js'


export interface ChildWorkerDeps {
  readonly db: Kysely<Database>
  readonly resume: (runId: string) => Effect.Effect<RunHandle, unknown>
  readonly log?: (line: string) => void
}

/**
 * Drives one child-run request to its end, then acks it. The child's row is created from the
 * request when this worker's store has not seen it (a worker with its own store). A request
 * for a run another live driver holds is handed back for later; one that cannot be run at all
 * (malformed, unreadable) is acked and logged, never retried forever, never a crash.
 */
export const handleChildDelivery = (deps: ChildWorkerDeps, delivery: ChildDelivery): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { request } = delivery
    const log = deps.log ?? (() => {})
    const contract = parseChildContract(request.contract, '/')
    if (Either.isLeft(contract) || typeof request.runId !== 'string' || typeof request.parentId !== 'string') {
      log(`skipped a malformed child-run request${typeof request.runId === 'string' ? ` for run ${request.runId}` : ''}`)
      return yield* delivery.ack
    }
    const row = yield* Effect.promise(() => getRun(deps.db, request.runId))
    if (row === undefined) yield* Effect.promise(() => insertChildRow(deps.db, request.runId, request.parentId, contract.right))
    else if (isFinalStatus(row.status)) return yield* delivery.ack
    // A request for a run this very process drives already (the queue handed it out again, to
    // another slot): resuming it here would take the lease from our own driver (a lease holder
    // may take its lease again) and stop that driver mid-step. It is like any live driver's.
    const drivenHere = row !== undefined && row.lease_owner !== null && (row.lease_expires_at ?? 0) > Date.now() && isOwnedByThisProcess(row.lease_owner)
    const started = drivenHere ? Either.left(new LeaseConflictError({ runId: request.runId, owner: row.lease_owner!, expiresAt: row.lease_expires_at! })) : yield* Effect.either(deps.resume(request.runId))
    if (Either.isLeft(started)) {
      if (started.left instanceof LeaseConflictError) {
        // Someone drives it now; look again later in case that driver dies.
        yield* Effect.sleep(Duration.seconds(1))
        return yield* delivery.nak
      }
      const reason = started.left instanceof Error ? started.left.message : String(started.left)
      log(`cannot run child ${request.runId}: ${reason}`)
      // A child that cannot open its workspace (spawned onto a file) never starts: it ends
      // failed, so its parent's wait ends too instead of lasting to the parent's deadline.
      if (started.left instanceof WorkspaceError) yield* Effect.promise(() => failUnstartedChild(deps.db, request.runId, reason))
      return yield* delivery.ack
    }
    log(`run ${request.runId} started (child of ${request.parentId}${delivery.deliveryCount > 1 ? `, delivery ${delivery.deliveryCount}` : ''})`)
    // The bus keeps the delivery in progress while this runs (`handleInProgress`).
    const result: RunResult = yield* started.right.result
    log(`run ${request.runId} ${result.status}`)
    yield* delivery.ack
  }).pipe(Effect.catchAllCause(() => delivery.nak))

const insertChildRow = async (db: Kysely<Database>, runId: string, parentId: string, contract: TaskContract): Promise<void> => {
  const parentKnown = (await getRun(db, parentId)) !== undefined
  // The parent lives in another store when this worker has its own: keep the link loose.
  await insertRun(db, childRunRow(runId, parentKnown ? parentId : null, contract, new Date().toISOString()))
}

const failUnstartedChild = async (db: Kysely<Database>, runId: string, message: string): Promise<void> => {
  const at = new Date().toISOString()
  const error: RunError = { kind: 'internal', message }
  await updateRun(db, runId, { status: 'failed', state: 'finished.failed', error_json: JSON.stringify(error), ended_at: at, updated_at: at, lease_owner: null, lease_expires_at: null })
}
