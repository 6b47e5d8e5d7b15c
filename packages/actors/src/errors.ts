import { Data } from 'effect'

/** `resume`, `show` or `cancel` named a run the store does not have. */
export class RunNotFoundError extends Data.TaggedError('RunNotFoundError')<{ readonly runId: string }> {
  override get message(): string {
    return `no run with id ${this.runId}`
  }
}

/** A stored run that cannot be driven (its contract or snapshot cannot be read). */
export class RunNotResumableError extends Data.TaggedError('RunNotResumableError')<{
  readonly runId: string
  readonly reason: string
}> {
  override get message(): string {
    return `run ${this.runId} cannot be resumed: ${this.reason}`
  }
}

/** A follow-up (`agentvisor send`) asked of a run that cannot take one (docs/policy.md, "Follow-ups"). */
/** A fork that cannot be made from that run at that seq (docs/cli.md, `fork`). */
export class ForkRefusedError extends Data.TaggedError('ForkRefusedError')<{
  readonly runId: string
  readonly seq: number
  readonly reason: string
}> {
  override get message(): string {
    return `run ${this.runId} cannot be forked at seq ${this.seq}: ${this.reason}`
  }
}

/** A run a replay cannot take (docs/replay.md): it has not ended. */
export class ReplayRefusedError extends Data.TaggedError('ReplayRefusedError')<{
  readonly runId: string
  readonly reason: string
}> {
  override get message(): string {
    return `run ${this.runId} cannot be replayed: ${this.reason}`
  }
}

export class FollowUpRefusedError extends Data.TaggedError('FollowUpRefusedError')<{
  readonly runId: string
  readonly reason: string
}> {
  override get message(): string {
    return `run ${this.runId} cannot take a follow-up: ${this.reason}`
  }
}

/** An approval or cancel named a request the run does not have. */
export class RequestNotFoundError extends Data.TaggedError('RequestNotFoundError')<{
  readonly runId: string
  readonly requestId: string
}> {
  override get message(): string {
    return `run ${this.runId} has no request ${this.requestId}`
  }
}

/** The named request was decided already (by anyone: first decision wins, docs/policy.md). */
export class RequestDecidedError extends Data.TaggedError('RequestDecidedError')<{
  readonly requestId: string
  /** What it was decided as, when known (`approved`, `denied`). */
  readonly status?: string | undefined
}> {
  override get message(): string {
    return `request ${this.requestId} was already ${this.status ?? 'decided'}`
  }
}

/** Nothing of the asked kind waits for a decision: `approval` (approve/deny) or `recovery`. */
export class NothingPendingError extends Data.TaggedError('NothingPendingError')<{
  readonly runId: string
  readonly kind: 'approval' | 'recovery' | 'input'
}> {
  override get message(): string {
    if (this.kind === 'input') return `run ${this.runId} has no question waiting for an answer`
    return this.kind === 'recovery' ? `run ${this.runId} has no pending recovery request` : `run ${this.runId} has no pending approval requests`
  }
}

/**
 * An approve or deny reached a recovery request (an exec interrupted after it started), which
 * only `retry`, `completed` or `abort` settle (docs/durability.md).
 */
export class RecoveryDecisionNeededError extends Data.TaggedError('RecoveryDecisionNeededError')<{
  readonly runId: string
  /** The recovery request named, or none when the run has only recovery requests pending. */
  readonly requestId?: string | undefined
}> {
  override get message(): string {
    return this.requestId !== undefined
      ? `request ${this.requestId} is a recovery request: decide it with retry, completed or abort`
      : `run ${this.runId} is waiting for a recovery decision: retry, completed or abort`
  }
}

/** A decision that needs exactly one request (an edit, a recovery) matched several: name one. */
export class AmbiguousRequestError extends Data.TaggedError('AmbiguousRequestError')<{
  readonly runId: string
  readonly what: 'edit' | 'recovery' | 'answer'
  readonly count: number
}> {
  override get message(): string {
    if (this.what === 'answer') return `run ${this.runId} has ${this.count} questions waiting: name the one this answers`
    return this.what === 'edit'
      ? `an edit needs exactly one request and run ${this.runId} has ${this.count} pending: name one`
      : `run ${this.runId} has ${this.count} recovery requests pending: name one`
  }
}

/**
 * The run's approver (a TypeScript callback or the terminal prompt) threw or rejected instead
 * of answering a request: the request stays pending (docs/typescript-api.md, "Approvals").
 */
export class ApproverFailedError extends Data.TaggedError('ApproverFailedError')<{
  readonly requestId: string
  readonly cause: unknown
}> {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `the approver gave no answer to request ${this.requestId}: ${cause}`
  }
}

/** Approve-with-edits refused: the edited arguments do not fit the tool, or cross a deny. */
export class EditRefusedError extends Data.TaggedError('EditRefusedError')<{ readonly reason: string }> {
  override get message(): string {
    return this.reason
  }
}

/** A stored run whose contract or policy cannot be read: nothing is decided for it. */
export class RunUnreadableError extends Data.TaggedError('RunUnreadableError')<{
  readonly runId: string
  readonly reason: string
}> {
  override get message(): string {
    return `run ${this.runId}: ${this.reason}`
  }
}

/** A cancel was recorded but the run's driver did not end it within the bound waited. */
export class CancelTimeoutError extends Data.TaggedError('CancelTimeoutError')<{
  readonly runId: string
  readonly waitedMs: number
}> {
  override get message(): string {
    return `run ${this.runId}: its driver did not stop within ${Math.round(this.waitedMs / 1000)} s; the cancel request stays recorded`
  }
}
