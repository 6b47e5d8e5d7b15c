import { MAX_NESTING_DEPTH, valueTooDeepAt } from '@agentvisor/core'
import { type Database, type DecisionSource, getRun, listApprovals, type RunStatus, type StoreError } from '@agentvisor/store'
import { Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import { decideRecovery, decideRequest } from '../approval/decide.js'
import { loadRunPolicy } from '../approval/run-policy.js'
import {
  AmbiguousRequestError,
  EditRefusedError,
  NothingPendingError,
  RecoveryDecisionNeededError,
  RequestDecidedError,
  RequestNotFoundError,
  RunNotFoundError,
  RunUnreadableError
} from '../errors.js'

/**
 * A decision on a run's pending requests: all of them, or the one `requestId` names.
 * `approve`/`deny` answer approval requests (`remember` keeps the decision for the workspace,
 * `edit` approves the call with other arguments, checked against the policy again);
 * `retry`/`completed`/`abort` settle a recovery request (docs/policy.md, docs/durability.md).
 */
export type ApproveAnswer =
  | {
      readonly requestId?: string | undefined
      readonly decision: 'approve'
      readonly remember?: boolean | undefined
      readonly edit?: Readonly<Record<string, unknown>> | undefined
    }
  | { readonly requestId?: string | undefined; readonly decision: 'deny'; readonly remember?: boolean | undefined }
  | { readonly requestId?: string | undefined; readonly decision: 'retry' | 'abort' }
  /** `account`: what the operator says the exec did; the model is told it instead of a rerun. */
  | { readonly requestId?: string | undefined; readonly decision: 'completed'; readonly account: string }

/** One request an `approve` decided. */
export interface DecidedRequest {
  readonly id: string
  readonly kind: 'approval' | 'recovery'
  readonly act: string
  readonly target: string
  readonly status: 'approved' | 'denied' | 'retry' | 'completed' | 'abort'
}

export interface ApproveOutcome {
  readonly runId: string
  readonly decided: ReadonlyArray<DecidedRequest>
  /** The run's status when decided: a paused run goes on with `resume`. */
  readonly runStatus: RunStatus
  /** How many of the run's requests still wait for a decision afterwards. */
  readonly pending: number
}

/** Why a decision was not taken (nothing of it was recorded). */
export type ApproveError =
  | RunNotFoundError
  | RequestNotFoundError
  | RequestDecidedError
  | NothingPendingError
  | RecoveryDecisionNeededError
  | AmbiguousRequestError
  | EditRefusedError
  | RunUnreadableError
  | StoreError

export interface ApproveDeps {
  readonly db: Kysely<Database>
  /** Who decides, for the audit trail: `cli` (CLI and inspector), `nats`, `api`. */
  readonly source: DecisionSource
}

const isRecoveryAnswer = (answer: ApproveAnswer): answer is Extract<ApproveAnswer, { decision: 'retry' | 'completed' | 'abort' }> =>
  answer.decision === 'retry' || answer.decision === 'completed' || answer.decision === 'abort'

/**
 * Decides pending requests of `runId`, each in its own transaction with its audit event; whoever
 * decides a request first wins. This is `agentvisor approve`, the inspector's buttons, NATS
 * `control.<run>.approve` and `Agentvisor.approve`: they differ only in `source`.
 */
export const approveRun = (deps: ApproveDeps, runId: string, answer: ApproveAnswer): Effect.Effect<ApproveOutcome, ApproveError> =>
  Effect.gen(function* () {
    const { db } = deps
    const { requestId } = answer
    const edit = answer.decision === 'approve' ? answer.edit : undefined
    // Tool arguments nest at most this deep (docs/task-file.md); deeper would overflow when stored.
    if (edit !== undefined && valueTooDeepAt(edit, MAX_NESTING_DEPTH) !== undefined) {
      return yield* new EditRefusedError({ reason: `the edit nests deeper than ${MAX_NESTING_DEPTH} levels` })
    }
    const run = yield* getRun(db, runId)
    if (run === undefined) return yield* new RunNotFoundError({ runId })
    const requests = yield* listApprovals(db, runId)
    // Questions are answered (`answerRun`), never approved.
    const pending = requests.filter((r) => r.status === 'pending' && r.kind !== 'input' && (requestId === undefined || r.id === requestId))
    if (pending.length === 0) {
      const named = requests.find((r) => r.id === requestId)
      if (named?.kind === 'input' && named.status === 'pending') return yield* new NothingPendingError({ runId, kind: 'approval' })
      if (requestId !== undefined && named !== undefined) return yield* new RequestDecidedError({ requestId, status: named.status })
      if (requestId !== undefined) return yield* new RequestNotFoundError({ runId, requestId })
      return yield* new NothingPendingError({ runId, kind: 'approval' })
    }
    if (edit !== undefined && pending.length > 1) return yield* new AmbiguousRequestError({ runId, what: 'edit', count: pending.length })
    const recovery = pending.filter((r) => r.kind === 'recovery')
    const at = () => new Date().toISOString()
    const remaining = Effect.map(listApprovals(db, runId), (rows) => rows.filter((r) => r.status === 'pending').length)

    if (isRecoveryAnswer(answer)) {
      if (recovery.length === 0) return yield* new NothingPendingError({ runId, kind: 'recovery' })
      if (recovery.length > 1 && requestId === undefined) return yield* new AmbiguousRequestError({ runId, what: 'recovery', count: recovery.length })
      const request = recovery[0]!
      const account = answer.decision === 'completed' ? answer.account : undefined
      // decideRecovery's ApprovalError cannot happen here: the request is a recovery request.
      yield* decideRecovery({ db, request, resolution: answer.decision, account, source: deps.source, at: at() }).pipe(
        Effect.catchTag('ApprovalError', Effect.die)
      )
      const decided: DecidedRequest = { id: request.id, kind: 'recovery', act: request.act, target: request.target, status: answer.decision }
      return { runId, decided: [decided], runStatus: run.status, pending: yield* remaining }
    }

    if (recovery.length > 0 && requestId !== undefined) return yield* new RecoveryDecisionNeededError({ runId, requestId })
    if (recovery.length === pending.length) return yield* new RecoveryDecisionNeededError({ runId })
    // Decoded by the store: a corrupt contract failed `getRun` (docs/durability.md, "Corrupt rows").
    const { contract } = run
    const policy = yield* loadRunPolicy(db, contract)
    if (Either.isLeft(policy)) return yield* new RunUnreadableError({ runId, reason: policy.left })
    const status = answer.decision === 'approve' ? 'approved' : 'denied'
    const decided: DecidedRequest[] = []
    for (const request of pending.filter((r) => r.kind !== 'recovery')) {
      yield* decideRequest({
        db,
        policy: policy.right,
        workspace: contract.workspace,
        request,
        answer: { decision: answer.decision, remember: answer.remember, edit },
        source: deps.source,
        at: at()
      })
      decided.push({ id: request.id, kind: request.kind === 'recovery' ? 'recovery' : 'approval', act: request.act, target: request.target, status })
    }
    return { runId, decided, runStatus: run.status, pending: yield* remaining }
  })

/** A decision refused for what was asked (the caller's mistake or a lost race), not for a failing store. */
export type ApproveRefusal = Exclude<ApproveError, StoreError>

const REFUSALS: ReadonlySet<string> = new Set<ApproveRefusal['_tag']>([
  'RunNotFoundError',
  'RequestNotFoundError',
  'RequestDecidedError',
  'NothingPendingError',
  'RecoveryDecisionNeededError',
  'AmbiguousRequestError',
  'EditRefusedError',
  'RunUnreadableError'
])

/** Whether a rejection of `approveRun` (or `Agentvisor.approve`) is a refusal rather than a store fault. */
export const isApproveRefusal = (error: unknown): error is ApproveRefusal =>
  typeof error === 'object' && error !== null && REFUSALS.has(String((error as { readonly _tag?: unknown })._tag))
