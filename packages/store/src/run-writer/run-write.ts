import type { NewApproval } from '../tables/approvals.table.js'
import type { AttemptSettlement, NewAttempt } from '../tables/attempts.table.js'
import type { NewPolicyEvent } from '../tables/policy-events.table.js'
import type { NewRun } from '../tables/runs.table.js'
import type { NewStep } from '../tables/steps.table.js'
import type { NewToolEffect } from '../tables/tool-effects.table.js'
import type { JournalTransition } from '../tables/journal-entries.table.js'

/**
 * One write a run's driver makes, as data. The driver describes what a transition commits;
 * a `RunWriter` performs it, through Kysely on any dialect or through prepared statements on
 * SQLite. Each variant means exactly what the repository function of the same name does.
 */
export type RunWrite =
  | { readonly op: 'insertAttempt'; readonly row: NewAttempt }
  | { readonly op: 'settleAttempt'; readonly runId: string; readonly step: number; readonly attempt: number; readonly patch: AttemptSettlement }
  | { readonly op: 'insertStep'; readonly row: NewStep }
  | { readonly op: 'setStepResults'; readonly runId: string; readonly step: number; readonly resultsJson: string }
  | { readonly op: 'setStepFeedback'; readonly runId: string; readonly step: number; readonly feedback: string }
  | { readonly op: 'insertApproval'; readonly row: NewApproval }
  | { readonly op: 'insertPolicyEvents'; readonly rows: ReadonlyArray<NewPolicyEvent> }
  | { readonly op: 'insertRun'; readonly row: NewRun }
  | { readonly op: 'startToolEffect'; readonly row: Omit<NewToolEffect, 'status' | 'result_json' | 'completed_at'> }
  | {
      readonly op: 'completeToolEffect'
      readonly runId: string
      readonly step: number
      readonly position: number
      readonly resultJson: string
      readonly at: string
    }

/** What a transition changes in its run's row. */
export interface RunHead {
  /** Omitted when it has not changed since the driver's last commit (it is indexed). */
  readonly status?: string
  readonly state: string
  readonly steps: number
  readonly updated_at: string
  readonly error_json: string | null
  readonly ended_at: string | null
}

/**
 * Transitions (one or more, in order) and everything committed with them, under the driver's
 * fencing token: one transaction, and one journal entry (docs/durability.md, "The journal").
 */
export interface TransitionCommit {
  readonly runId: string
  readonly leaseToken: number
  /** Step data belonging to the transitions (receipts, the step, tool results, approvals). */
  readonly writes: ReadonlyArray<RunWrite>
  readonly transitions: ReadonlyArray<JournalTransition>
  /** The machine's persisted snapshot after the last of them, in its versioned envelope, as the entry stores it. */
  readonly snapshot: string
  /** The run's head after the last of them. */
  readonly head: RunHead
  /**
   * The run's row is left as it is by this commit, to be refreshed by a later one (only for a
   * writer that `defersHead`, and never when the status changes): the fence is then a read of
   * the lease token under the write lock. The journal holds every transition either way; the
   * row's `state`, `steps` and `updated_at` lag it by at most the refresh interval
   * (docs/durability.md, "The run's row").
   */
  readonly headDeferred?: boolean
}

/**
 * A run's creation inside a group commit: its row, already leased (`insertRun`). Nothing is
 * fenced, since nobody else can know its id yet; a failure (an id taken) rolls it back alone
 * (docs/durability.md, "Group commit").
 */
export interface RunCreation {
  readonly created: Extract<RunWrite, { readonly op: 'insertRun' }>
}

/** What a group commit is made of: commits of transitions and creations of runs, each with an outcome of its own. */
export type GroupWrite = TransitionCommit | RunCreation
