// The Data module alone: the 'effect' barrel costs the CLI ~0.5 s of start-up.
import * as Data from 'effect/Data'

/**
 * The store could not be opened, migrated or used. `message` names the file and, for a failed
 * migration, the migration; `cause` keeps the driver's error for logs.
 *
 * A stored row whose JSON column does not decode is one too, with `runId` and `column`
 * (`steps.results_json`) set: it is reported, never guessed at (docs/durability.md, "Corrupt rows").
 */
export class StoreError extends Data.TaggedError('StoreError')<{
  readonly message: string
  readonly cause?: unknown
  /** The run whose row is corrupt. */
  readonly runId?: string | undefined
  /** The corrupt column, as `table.column`. */
  readonly column?: string | undefined
}> {}

/** Another live driver holds the run's lease: only one process may move a run at a time. */
export class LeaseConflictError extends Data.TaggedError('LeaseConflictError')<{
  readonly runId: string
  readonly owner: string
  readonly expiresAt: number
}> {
  override get message(): string {
    return `run ${this.runId} is being driven by ${this.owner} (lease until ${new Date(this.expiresAt).toISOString()})`
  }
}

/** This driver's lease was taken over: its writes are refused (fencing) and it must stop. */
export class LeaseLostError extends Data.TaggedError('LeaseLostError')<{ readonly runId: string }> {
  override get message(): string {
    return `run ${this.runId}: this driver's lease was taken over by another driver`
  }
}
