import { hostname } from 'node:os'
import { ContractError, DEFAULT_CHILD_LIMITS, type RunError, WorkspaceError } from '@agentvisor/core'
import {
  type Database,
  getRun,
  getRunRow,
  insertRunOnce,
  isFinalStatus,
  LeaseConflictError,
  type LeaseLostError,
  listChildren,
  RunCreation,
  type RunRow,
  StoreError,
  updateRun
} from '@agentvisor/store'
import { type Cause, Duration, Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import { type ChildDelivery, MAX_CHILD_HANDLING_FAILURES } from '../protocol/bus.js'
import { invalidRunId } from '../protocol/messages.js'
import { childRunRow, narrowChildRequest } from '../protocol/child-contract.js'
import type { ChildRunRequest } from '../protocol/messages.js'
import { oneLine } from '../loop/one-line.js'
import { causeLine } from '../loop/survive.js'
import { isOwnedByThisProcess } from '../supervisor/lease.js'
import type { RunHandle, RunResult, StartOptions } from '../supervisor/run-handle.js'

export interface ChildWorkerDeps {
  readonly db: Kysely<Database>
  readonly resume: (runId: string, options?: StartOptions) => Effect.Effect<RunHandle, unknown>
  readonly log?: (line: string) => void
}

/** What to do with a request: drive this run (its row is in the store now), or refuse it. */
type Admission = { readonly drive: RunRow | undefined } | { readonly refused: string }

const refuse = (reason: string): Admission => ({ refused: reason })

/**
 * Decides whether a child-run request may run here (docs/nats.md, "Who may start a run"). A run
 * whose row exists (its parent created it before handing it to the bus, the usual case) is
 * driven from its stored contract; the request's contract is not even read. Otherwise the
 * parent must be in this store and live, may still start children, and the request's contract
 * must narrow the parent's: the row is then created from the parent's contract. Whatever is
 * refused leaves no row, no folder, no request to any provider and no process behind.
 */
const admit = (db: Kysely<Database>, runId: string, parentId: string | null, asked: unknown): Effect.Effect<Admission, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    const row = yield* getRunRow(db, runId)
    if (row !== undefined) {
      if (row.parent_id === parentId) return { drive: row }
      if (parentId === null) return refuse(`it is a child of ${row.parent_id}, not a submitted run`)
      return refuse(row.parent_id === null ? 'it is not a child run' : `it is a child of ${row.parent_id}, not of ${parentId}`)
    }
    // A root run's row is written by the worker that took its submission (docs/nats.md,
    // "Submitting runs"): a root run that arrives on the start subject without one is not one.
    if (parentId === null) return refuse("a root run is taken on the submit subject, which stores it first; none is in this worker's store")
    const parent = yield* getRun(db, parentId).pipe(
      // A parent whose row is corrupt (docs/durability.md, "Corrupt rows") will not read better later.
      Effect.catchIf(
        (error): error is StoreError => error instanceof StoreError && error.column !== undefined,
        (error) => Effect.succeed(error)
      )
    )
    if (parent instanceof StoreError) return refuse(`its parent ${parentId} has no readable row: ${parent.message}`)
    if (parent === undefined) return refuse(`its parent ${parentId} is not in this worker's store`)
    if (isFinalStatus(parent.status)) return refuse(`its parent ${parentId} has ended (${parent.status})`)
    const parentContract = parent.contract
    const caps = parentContract.children ?? DEFAULT_CHILD_LIMITS
    const depth = parentContract.lineage?.depth ?? 0
    if (depth >= caps.maxDepth) return refuse(`its parent ${parentId} may not start children (depth ${depth} of at most ${caps.maxDepth})`)
    const siblings = yield* listChildren(db, parentId)
    if (siblings.length >= caps.maxChildren) return refuse(`its parent ${parentId} has started its ${caps.maxChildren} children already`)
    const contract = narrowChildRequest(parentContract, parentId, asked)
    if (Either.isLeft(contract)) return refuse(contract.left)
    const creation = yield* insertRunOnce(db, childRunRow(runId, parentId, contract.right, new Date().toISOString()))
    if (creation !== RunCreation.differs) return { drive: undefined }
    // Its row was written meanwhile (by its parent, or for another delivery of this request): the
    // stored run is the one that runs, as when it was there from the start.
    const written = yield* getRunRow(db, runId)
    if (written?.parent_id === parentId) return { drive: written }
    return refuse(`it is a child of ${written?.parent_id ?? 'no run'}, not of ${parentId}`)
  })

/**
 * Drives one child-run request to its end, then acks it. A request for a run another live
 * driver holds is handed back for later; one that may not run here (see `admit`) or cannot run
 * at all (malformed, unreadable) is acked, so never delivered again, and logged in one line
 * naming the run; nothing a publisher sends crashes the worker. A store that fails fails the
 * handling: the bus logs it and tries again, a bounded number of times (`serveDelivery`), then
 * gives the run up with {@link giveUpChild}.
 */
export const handleChildDelivery = (deps: ChildWorkerDeps, delivery: ChildDelivery): Effect.Effect<void, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    const { request } = delivery
    const log = deps.log ?? (() => {})
    const badId = invalidRunId(request.runId) ?? (request.parentId === null ? undefined : invalidRunId(request.parentId, 'parent id'))
    if (badId !== undefined) {
      log(`refused a ${request.parentId === null ? 'submitted' : 'child'}-run request: ${badId}`)
      return yield* delivery.ack
    }
    const admission = yield* admit(deps.db, request.runId, request.parentId, request.contract)
    if ('refused' in admission) {
      log(`refused ${request.parentId === null ? 'run' : 'child run'} ${request.runId}: ${oneLine(admission.refused, 500)}`)
      return yield* delivery.ack
    }
    const row = admission.drive
    if (row !== undefined && isFinalStatus(row.status)) return yield* delivery.ack
    // A request for a run this very process drives already (the queue handed it out again, to
    // another slot): resuming it here would take the lease from our own driver (a lease holder
    // may take its lease again) and stop that driver mid-step. It is like any live driver's.
    const drivenHere = row !== undefined && row.lease_owner !== null && (row.lease_expires_at ?? 0) > Date.now() && isOwnedByThisProcess(row.lease_owner)
    const started = drivenHere
      ? Either.left(new LeaseConflictError({ runId: request.runId, owner: row.lease_owner!, expiresAt: row.lease_expires_at! }))
      : yield* Effect.either(deps.resume(request.runId, request.traceparent === undefined ? {} : { traceparent: request.traceparent }))
    if (Either.isLeft(started)) {
      if (started.left instanceof LeaseConflictError) {
        // Someone drives it now; look again later in case that driver dies.
        yield* Effect.sleep(Duration.seconds(1))
        return yield* delivery.nak
      }
      const reason = started.left instanceof Error ? started.left.message : String(started.left)
      log(`cannot run child ${request.runId}: ${reason}`)
      // A child that cannot open its workspace (spawned onto a file), or whose agent needs a tool
      // this worker lacks, never starts: it ends failed, so its parent's wait ends too instead of
      // lasting to the parent's deadline.
      if (started.left instanceof WorkspaceError) yield* failUnstartedChild(deps.db, request.runId, reason)
      if (started.left instanceof ContractError) yield* failUnstartedChild(deps.db, request.runId, `worker ${workerName()} cannot run it: ${reason}`)
      return yield* delivery.ack
    }
    const resumed = row !== undefined && row.state !== 'dispatching' ? 'resumed, ' : ''
    const origin = request.parentId === null ? 'submitted' : `child of ${request.parentId}`
    log(`run ${request.runId} started (${resumed}${origin}${delivery.deliveryCount > 1 ? `, delivery ${delivery.deliveryCount}` : ''})`)
    // The bus keeps the delivery in progress while this runs (`handleInProgress`).
    const result: RunResult = yield* started.right.result
    log(`run ${request.runId} ${result.status}`)
    yield* delivery.ack
  })

/**
 * Ends the run of a request whose handling failed too often (docs/nats.md, "When handling a
 * request fails"): `failed`, kind `internal`, the cause in its message, so its parent's wait
 * ends. A run that ended meanwhile, or that a live driver holds, is left as it is.
 */
export const giveUpChild = (db: Kysely<Database>, request: ChildRunRequest, cause: Cause.Cause<unknown>): Effect.Effect<void, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    if (invalidRunId(request.runId) !== undefined) return
    const row = yield* getRunRow(db, request.runId)
    if (row === undefined || isFinalStatus(row.status)) return
    if (row.lease_owner !== null && (row.lease_expires_at ?? 0) > Date.now()) return
    yield* failUnstartedChild(db, request.runId, `the worker gave this run up after its request failed ${MAX_FAILURES_TEXT}: ${causeLine(cause)}`)
  })

const MAX_FAILURES_TEXT = `${MAX_CHILD_HANDLING_FAILURES} times`

const failUnstartedChild = (db: Kysely<Database>, runId: string, message: string): Effect.Effect<void, StoreError | LeaseLostError> => {
  const at = new Date().toISOString()
  const error: RunError = { kind: 'internal', message }
  return updateRun(db, runId, {
    status: 'failed',
    state: 'finished.failed',
    error_json: JSON.stringify(error),
    ended_at: at,
    updated_at: at,
    lease_owner: null,
    lease_expires_at: null
  })
}

/** How a worker names itself in a run's error: its host and process. */
const workerName = (): string => `${hostname()}/${process.pid}`
