import type { Kysely } from 'kysely'
import type { Database } from '../database.js'
import { LeaseLostError, type StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import type { Eventually, StoreCall } from '../store-call.js'
import { insertApprovalAsync, listApprovalsAsync } from '../repositories/approvals.repository.js'
import { insertAttemptAsync, settleAttemptAsync, settlePendingAttemptsAsync } from '../repositories/attempts.repository.js'
import { acquireLeaseAsync, checkFence, type LeaseAcquisition, type LeaseRequest, releaseLeaseAsync } from '../repositories/leases.repository.js'
import { insertPolicyEventsAsync } from '../repositories/policy-events.repository.js'
import { listRememberedRulesAsync } from '../repositories/remembered-rules.repository.js'
import { getRunAsync, insertRunAsync } from '../repositories/runs.repository.js'
import { insertStepAsync, lastStepTextAsync, listStepsAsync, setStepFeedbackAsync, setStepResultsAsync } from '../repositories/steps.repository.js'
import { completeToolEffectAsync, listToolEffectsAsync, startToolEffectAsync } from '../repositories/tool-effects.repository.js'
import { appendJournalEntryAsync, type JournalHead, journalEntry, lastJournalEntryAsync } from '../repositories/journal-entries.repository.js'
import { type AttemptTotals, runAttemptTotalsAsync } from '../repositories/run-usage.repository.js'
import type { ApprovalRow } from '../tables/approvals.table.js'
import type { RememberedRuleRow } from '../tables/remembered-rules.table.js'
import type { NewRun, RunStatus, RunWithContract } from '../tables/runs.table.js'
import type { SettledAttemptOutcome } from '../tables/attempts.table.js'
import type { StepRow } from '../tables/steps.table.js'
import type { ToolEffectRow } from '../tables/tool-effects.table.js'
import type { RunHead, RunWrite, TransitionCommit } from './run-write.js'

/** The fencing token of a run created with its lease (the next acquisition bumps it). */
export const FIRST_LEASE_TOKEN = 1

/** A new run's row as every writer's `createRun` writes it: leased to `lease.owner` under the first token. */
export const leasedRun = (row: NewRun, lease: NewLease): NewRun => ({
  ...row,
  lease_owner: lease.owner,
  lease_expires_at: lease.expiresAt,
  lease_token: FIRST_LEASE_TOKEN
})

/** What a resume reads of a run. */
export interface LoadedRun {
  readonly run: RunWithContract
  /** Its last journal entry's seq and snapshot; undefined before its first transition. */
  readonly last: JournalHead | undefined
  readonly steps: StepRow[]
}

/** Whether a write may wait briefly to share one transaction with other runs' (a group commit). */
export interface BatchOption {
  readonly batch?: boolean
}

/** A new run's lease: its owner and when it expires. */
export interface NewLease {
  readonly owner: string
  readonly expiresAt: number
}

/**
 * The writes and reads a run's driver makes at every step, behind one interface so that SQLite
 * can do them synchronously with prepared statements while other dialects go through their
 * driver. Each is a store call (store-call.ts): an Effect failing `StoreError`, answered at once
 * on SQLite (an `Exit`: no promise). Every fenced method fails `LeaseLostError` when
 * `leaseToken` is no longer the run's: a superseded driver writes nothing.
 */
export interface RunWriter {
  /**
   * Commits transitions, their step data and the run's new head in one transaction. With
   * `batch`, the writer may hold it briefly to share one transaction (one log write) with the
   * commits of other runs; it is durable when the call succeeds either way.
   */
  readonly commit: (commit: TransitionCommit, options?: BatchOption) => StoreCall<void, StoreError | LeaseLostError>
  /**
   * Writes the run's head alone, fenced (`state`, `steps`, `updated_at`; never the status). A
   * writer that has it takes commits that leave the head for a later refresh
   * (`TransitionCommit.headDeferred`): one B-tree page and one UPDATE less at each commit that
   * changes no status (SQLite). A writer without it writes the head at every commit.
   */
  readonly refreshHead?: (runId: string, leaseToken: number, head: RunHead) => StoreCall<void, StoreError | LeaseLostError>
  /**
   * Creates a run already leased to `owner` (fencing token 1): a new run needs no separate
   * acquisition, since nobody else can know its id yet. Answers the token. With `batch`, the
   * writer may make it part of a group commit, like `commit`.
   */
  readonly createRun: (row: NewRun, lease: NewLease, options?: BatchOption) => StoreCall<number, StoreError>
  /** Fenced writes outside a transition (a receipt before its dispatch, tool journal entries). */
  readonly write: (runId: string, leaseToken: number, writes: ReadonlyArray<RunWrite>) => StoreCall<void, StoreError | LeaseLostError>
  /** The approval requests of one step, as `listApprovals` orders them. */
  readonly approvals: (runId: string, step: number) => StoreCall<ApprovalRow[], StoreError>
  /** The tool journal of one step, by position. */
  readonly toolEffects: (runId: string, step: number) => StoreCall<ToolEffectRow[], StoreError>
  /** A run with its contract, last journal entry and steps: what a resume restores. */
  readonly loadRun: (runId: string) => StoreCall<LoadedRun | undefined, StoreError>
  /** `acquireLease` (see leases.repository.ts), in one transaction. */
  readonly acquireLease: (input: LeaseRequest) => StoreCall<LeaseAcquisition | undefined, StoreError>
  /**
   * The run's receipts summed by provider and outcome (`runAttemptTotals`): where a resumed run's
   * usage tally starts (docs/task-file.md, "Usage and budgets").
   */
  readonly attemptTotals: (runId: string) => StoreCall<AttemptTotals[], StoreError>
  /** Whether the receipt of this attempt exists (in whatever outcome). */
  readonly attemptRecorded: (runId: string, step: number, attempt: number) => StoreCall<boolean, StoreError>
  /**
   * `releaseLease`: gives the lease up if this token still holds it, and records the run's usage
   * (`runs.usage_json`) in the same statement when given.
   */
  readonly releaseLease: (runId: string, leaseToken: number, usageJson?: string) => StoreCall<void, StoreError>
  /** Settles the run's pending receipts (`settlePendingAttempts`), fenced; answers how many. */
  readonly settlePending: (runId: string, leaseToken: number, outcome: SettledAttemptOutcome, at: string) => StoreCall<number, StoreError | LeaseLostError>
  /** The decisions remembered for a workspace, as `listRememberedRules` orders them (a run's start reads them). */
  readonly rememberedRules: (workspace: string) => StoreCall<RememberedRuleRow[], StoreError>
  /**
   * The text of the run's last step that answered with text (its `done` message's `result`), or
   * undefined: one row read, whatever the run's length (every run's end asks it).
   */
  readonly lastStepText: (runId: string) => StoreCall<string | undefined, StoreError>
  /** Stops what the writer runs in the background (SQLite's checkpointer); the store stays open. */
  readonly close: () => StoreCall<void, StoreError>
}

/** A `RunWriter` method as a dialect implements it: the same arguments, the answer now or by promise. */
type RawMethod<F> = F extends (...args: infer P) => StoreCall<infer A, unknown> ? (...args: P) => Eventually<A> : never

/**
 * A dialect's `RunWriter` as it implements it: each method answers now (SQLite) or by promise,
 * and throws (or rejects) with the driver's own error, a fenced one with `LeaseLostError`.
 * `runWriterOf` (run-writer-of.ts) makes each one a store call.
 */
export type RawRunWriter = { readonly [K in keyof RunWriter]: RawMethod<NonNullable<RunWriter[K]>> }

/** Performs one write through the repositories (inside the caller's transaction). */
export async function applyRunWrite(db: Executor, write: RunWrite): Promise<void> {
  switch (write.op) {
    case 'insertAttempt':
      return insertAttemptAsync(db, write.row)
    case 'settleAttempt':
      await settleAttemptAsync(db, write.runId, write.step, write.attempt, write.patch)
      return
    case 'insertStep':
      return insertStepAsync(db, write.row)
    case 'setStepResults':
      await setStepResultsAsync(db, write.runId, write.step, write.resultsJson)
      return
    case 'setStepFeedback':
      await setStepFeedbackAsync(db, write.runId, write.step, write.feedback)
      return
    case 'insertApproval':
      return insertApprovalAsync(db, write.row)
    case 'insertPolicyEvents':
      return insertPolicyEventsAsync(db, write.rows)
    case 'insertRun':
      return insertRunAsync(db, write.row)
    case 'startToolEffect':
      return startToolEffectAsync(db, write.row)
    case 'completeToolEffect':
      await completeToolEffectAsync(db, write.runId, write.step, write.position, write.resultJson, write.at)
      return
  }
}

/** The run row's columns a commit sets (the status only when the driver says it changed). */
const headUpdate = ({ status, ...rest }: TransitionCommit['head']) => (status === undefined ? rest : { ...rest, status: status as RunStatus })

/** The `RawRunWriter` of any dialect: each call one Kysely transaction, fenced by `checkFence`. */
export function kyselyRawWriter(db: Kysely<Database>): RawRunWriter {
  return {
    commit: (commit) =>
      db.transaction().execute(async (trx) => {
        await checkFence(trx, commit.runId, commit.leaseToken)
        for (const write of commit.writes) await applyRunWrite(trx, write)
        if (commit.transitions.length > 0) await appendJournalEntryAsync(trx, journalEntry(commit.runId, commit.transitions, commit.snapshot))
        const updated = await trx
          .updateTable('runs')
          .set(headUpdate(commit.head))
          .where('id', '=', commit.runId)
          .where('lease_token', '=', commit.leaseToken)
          .executeTakeFirst()
        if (updated.numUpdatedRows === 0n) throw new LeaseLostError({ runId: commit.runId })
      }),
    createRun: async (row, lease) => {
      await insertRunAsync(db, leasedRun(row, lease))
      return FIRST_LEASE_TOKEN
    },
    write: (runId, leaseToken, writes) =>
      db.transaction().execute(async (trx) => {
        await checkFence(trx, runId, leaseToken)
        for (const write of writes) await applyRunWrite(trx, write)
      }),
    approvals: (runId, step) => listApprovalsAsync(db, runId, step),
    toolEffects: (runId, step) => listToolEffectsAsync(db, runId, step),
    loadRun: async (runId) => {
      const run = await getRunAsync(db, runId)
      if (run === undefined) return undefined
      const [last, steps] = await Promise.all([lastJournalEntryAsync(db, runId), listStepsAsync(db, runId)])
      return { run, last, steps }
    },
    acquireLease: (input) => acquireLeaseAsync(db, input),
    attemptTotals: (runId) => runAttemptTotalsAsync(db, runId),
    releaseLease: (runId, leaseToken, usageJson) => releaseLeaseAsync(db, runId, leaseToken, usageJson),
    attemptRecorded: async (runId, step, attempt) =>
      (await db
        .selectFrom('attempts')
        .select('attempt')
        .where('run_id', '=', runId)
        .where('step', '=', step)
        .where('attempt', '=', attempt)
        .executeTakeFirst()) !== undefined,
    settlePending: (runId, leaseToken, outcome, at) =>
      db.transaction().execute(async (trx) => {
        await checkFence(trx, runId, leaseToken)
        return settlePendingAttemptsAsync(trx, runId, outcome, at)
      }),
    rememberedRules: (workspace) => listRememberedRulesAsync(db, workspace),
    lastStepText: (runId) => lastStepTextAsync(db, runId),
    close: async () => undefined
  }
}
