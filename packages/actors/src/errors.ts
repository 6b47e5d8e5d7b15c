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
