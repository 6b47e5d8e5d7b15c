import { type ApproveAnswer, type ApproveRefusal, approveRun, isApproveRefusal } from '@agentvisor/actors'
import { MAX_NESTING_DEPTH, valueTooDeepAt } from '@agentvisor/core'
import type { Store } from '@agentvisor/store'
import { Cause, Effect, Exit } from 'effect'
import { HttpError } from './http.js'

/** The body of `POST /api/runs/:id/approvals/:requestId`. */
export interface ApprovalBody {
  readonly decision: 'approve' | 'deny'
  /** Keep the decision for later runs of the same workspace. */
  readonly remember?: boolean
  /** Replacement arguments for the tool call (approve with edits); checked against the policy again. */
  readonly edit?: Readonly<Record<string, unknown>>
}

/** What a decision led to. */
export interface DecisionOutcome {
  readonly requestId: string
  readonly status: 'approved' | 'denied'
  /** Whether this decision was the run's last pending one and the inspector now drives the run on. */
  readonly resumed: boolean
  /** Requests of the run still waiting for a decision. */
  readonly pending: number
  /** Why the run was not driven on, when it was not. */
  readonly note?: string
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** Validates the body; anything else is a 400 naming the field. */
export const parseApprovalBody = (body: unknown): ApprovalBody => {
  const bad = (message: string): never => {
    throw new HttpError({ status: 400, message })
  }
  if (!isRecord(body)) return bad('the body must be a JSON object: {"decision": "approve" | "deny"}')
  const { decision, remember, edit } = body
  if (decision !== 'approve' && decision !== 'deny') return bad('decision must be "approve" or "deny"')
  if (remember !== undefined && typeof remember !== 'boolean') return bad('remember must be a boolean')
  if (edit !== undefined && !isRecord(edit)) return bad("edit must be a JSON object of the tool call's arguments")
  if (edit !== undefined && decision === 'deny') return bad('edit approves with changes; it cannot be combined with deny')
  // Tool arguments nest at most this deep (docs/task-file.md); deeper would overflow when stored.
  if (edit !== undefined && valueTooDeepAt(edit, MAX_NESTING_DEPTH) !== undefined) return bad(`edit nests deeper than ${MAX_NESTING_DEPTH} levels`)
  return { decision, ...(remember !== undefined ? { remember } : {}), ...(edit !== undefined ? { edit } : {}) }
}

export interface DecisionDeps {
  readonly db: Store['db']
  /** Drives a paused run on in this process; rejects when it cannot (another process drives it). */
  readonly drive: (runId: string) => Promise<void>
}

/**
 * Decides one pending request of a run through the use case `agentvisor approve` uses, audited
 * with source `inspector`. When it was the run's last pending
 * request, the paused run is driven on here, so it goes on without a separate `resume`.
 */
export const decideFromInspector = async (deps: DecisionDeps, runId: string, requestId: string, body: ApprovalBody): Promise<DecisionOutcome> => {
  const answer: ApproveAnswer =
    body.decision === 'approve'
      ? { requestId, decision: 'approve', remember: body.remember, edit: body.edit }
      : { requestId, decision: 'deny', remember: body.remember }
  const exit = await Effect.runPromiseExit(approveRun({ db: deps.db, source: 'inspector' }, runId, answer))
  if (Exit.isFailure(exit)) {
    const error = Cause.squash(exit.cause)
    throw isApproveRefusal(error) ? httpErrorOf(runId, requestId, error) : error
  }
  const { runStatus, pending } = exit.value
  const status = body.decision === 'approve' ? 'approved' : 'denied'
  const decided = { requestId, status, pending } as const
  if (pending > 0) return { ...decided, resumed: false, note: `the run waits for ${pending} more decision${pending === 1 ? '' : 's'}` }
  if (runStatus !== 'awaiting_approval') return { ...decided, resumed: false, note: `the run is ${runStatus}, not paused` }
  try {
    await deps.drive(runId)
    return { ...decided, resumed: true }
  } catch (error) {
    // The decision stands whoever drives the run; say why this process does not.
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error)
    return { ...decided, resumed: false, note: `decided, but the run was not resumed here: ${message}` }
  }
}

/** The use case's refusals as HTTP statuses (docs/inspector.md): unknown 404, conflicting 409, a refused edit 422. */
const httpErrorOf = (runId: string, requestId: string, error: ApproveRefusal): HttpError => {
  switch (error._tag) {
    case 'RunNotFoundError':
    case 'RequestNotFoundError':
      return new HttpError({ status: 404, message: error.message })
    case 'EditRefusedError':
      return new HttpError({ status: 422, message: error.message })
    case 'RecoveryDecisionNeededError':
      return new HttpError({
        status: 409,
        message: `request ${requestId} is an interrupted exec: settle it with agentvisor approve ${runId} ${requestId} --retry | --completed TEXT | --abort`
      })
    case 'RequestDecidedError':
    case 'NothingPendingError':
    case 'AmbiguousRequestError':
    case 'RunUnreadableError':
      return new HttpError({ status: 409, message: error.message })
  }
}
