import { listRememberedRules } from '../repositories/remembered-rules.repository.js'
import type { RememberedRuleRow } from '../tables/remembered-rules.table.js'
import type { Kysely } from 'kysely'
import type { Database } from '../database.js'
import { LeaseLostError } from '../errors.js'
import type { Executor } from '../executor.js'
import { insertApproval, listApprovals } from '../repositories/approvals.repository.js'
import { insertAttempt, settleAttempt } from '../repositories/attempts.repository.js'
import { checkFence } from '../repositories/leases.repository.js'
import { insertPolicyEvents } from '../repositories/policy-events.repository.js'
import { insertRun } from '../repositories/runs.repository.js'
import { insertStep, setStepFeedback, setStepResults } from '../repositories/steps.repository.js'
import { completeToolEffect, listToolEffects, startToolEffect } from '../repositories/tool-effects.repository.js'
import { appendJournalEntry, type JournalHead, journalEntry, lastJournalEntry } from '../repositories/journal-entries.repository.js'
import type { ApprovalRow } from '../tables/approvals.table.js'
import type { NewRun, RunStatus, RunWithContract } from '../tables/runs.table.js'
import type { SettledAttemptOutcome } from '../tables/attempts.table.js'
import type { StepRow } from '../tables/steps.table.js'
import { getRun } from '../repositories/runs.repository.js'
import { lastStepText, listSteps } from '../repositories/steps.repository.js'
import { acquireLease, type LeaseAcquisition, releaseLease } from '../repositories/leases.repository.js'
import { settlePendingAttempts } from '../repositories/attempts.repository.js'
import { type AttemptTotals, runAttemptTotals } from '../repositories/run-usage.repository.js'
import type { ToolEffectRow } from '../tables/tool-effects.table.js'
import type { RunHead, RunWrite, TransitionCommit } from './run-write.js'

/** The fencing token of a run created with its lease (the next acquisition bumps it). */
export const FIRST_LEASE_TOKEN = 1

/** A new run's row as every writer's `createRun` writes it: leased to `lease.owner` under the first token. */
export const leasedRun = (row: NewRun, lease: { readonly owner: string; readonly expiresAt: number }): NewRun => ({
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

/** Who asks for a run's lease, when, for how long, and how to tell a dead holder. */
export interface LeaseRequest {
  readonly runId: string
  readonly owner: string
  readonly now: number
  readonly ttlMs: number
  readonly isAbandoned: (owner: string) => boolean
}

/** Whether a write may wait briefly to share one transaction with other runs' (a group commit). */
export interface BatchOption {
  readonly batch?: boolean
}

/** A value now (the SQLite hot path) or later (any other dialect). */
export type Eventually<A> = A | Promise<A>

/**
 * The writes and reads a run's driver makes at every step, behind one interface so that SQLite
 * can do them synchronously with prepared statements while other dialects go through Kysely.
 * Every fenced method rejects (or throws) `LeaseLostError` when `leaseToken` is no longer the
 * run's: a superseded driver writes nothing.
 */
export interface RunWriter {
  /**
   * Commits transitions, their step data and the run's new head in one transaction. With
   * `batch`, the writer may hold it briefly to share one transaction (one log write) with the
   * commits of other runs; it is durable when the result settles either way.
   */
  readonly commit: (commit: TransitionCommit, options?: BatchOption) => Eventually<void>
  /**
   * Writes the run's head alone, fenced (`state`, `steps`, `updated_at`; never the status). A
   * writer that has it takes commits that leave the head for a later refresh
   * (`TransitionCommit.headDeferred`): one B-tree page and one UPDATE less at each commit that
   * changes no status (SQLite). A writer without it writes the head at every commit.
   */
  readonly refreshHead?: (runId: string, leaseToken: number, head: RunHead) => Eventually<void>
  /**
   * Creates a run already leased to `owner` (fencing token 1): a new run needs no separate
   * acquisition, since nobody else can know its id yet. Returns the token. With `batch`, the
   * writer may make it part of a group commit, like `commit`.
   */
  readonly createRun: (row: NewRun, lease: { readonly owner: string; readonly expiresAt: number }, options?: BatchOption) => Eventually<number>
  /** Fenced writes outside a transition (a receipt before its dispatch, tool journal entries). */
  readonly write: (runId: string, leaseToken: number, writes: ReadonlyArray<RunWrite>) => Eventually<void>
  /** The approval requests of one step, as `listApprovals` orders them. */
  readonly approvals: (runId: string, step: number) => Eventually<ApprovalRow[]>
  /** The tool journal of one step, by position. */
  readonly toolEffects: (runId: string, step: number) => Eventually<ToolEffectRow[]>
  /** A run with its contract, last journal entry and steps: what a resume restores. */
  readonly loadRun: (runId: string) => Eventually<LoadedRun | undefined>
  /** `acquireLease` (see leases.repository.ts), in one transaction. */
  readonly acquireLease: (input: LeaseRequest) => Eventually<LeaseAcquisition | undefined>
  /**
   * The run's receipts summed by provider and outcome (`runAttemptTotals`): where a resumed run's
   * usage tally starts (docs/task-file.md, "Usage and budgets").
   */
  readonly attemptTotals: (runId: string) => Eventually<AttemptTotals[]>
  /** Whether the receipt of this attempt exists (in whatever outcome). */
  readonly attemptRecorded: (runId: string, step: number, attempt: number) => Eventually<boolean>
  /**
   * `releaseLease`: gives the lease up if this token still holds it, and records the run's usage
   * (`runs.usage_json`) in the same statement when given.
   */
  readonly releaseLease: (runId: string, leaseToken: number, usageJson?: string) => Eventually<void>
  /** Settles the run's pending receipts (`settlePendingAttempts`), fenced; returns how many. */
  readonly settlePending: (runId: string, leaseToken: number, outcome: SettledAttemptOutcome, at: string) => Eventually<number>
  /** Stops what the writer runs in the background (SQLite's checkpointer); the store stays open. */
  /** The decisions remembered for a workspace, as `listRememberedRules` orders them (a run's start reads them). */
  readonly rememberedRules: (workspace: string) => Eventually<RememberedRuleRow[]>
  /**
   * The text of the run's last step that answered with text (its `done` message's `result`), or
   * undefined: one row read, whatever the run's length (every run's end asks it).
   */
  readonly lastStepText: (runId: string) => Eventually<string | undefined>
  readonly close: () => Promise<void>
}

/** Performs one write through the repositories (inside the caller's transaction). */
export async function applyRunWrite(db: Executor, write: RunWrite): Promise<void> {
  switch (write.op) {
    case 'insertAttempt':
      return insertAttempt(db, write.row)
    case 'settleAttempt':
      await settleAttempt(db, write.runId, write.step, write.attempt, write.patch)
      return
    case 'insertStep':
      return insertStep(db, write.row)
    case 'setStepResults':
      await setStepResults(db, write.runId, write.step, write.resultsJson)
      return
    case 'setStepFeedback':
      await setStepFeedback(db, write.runId, write.step, write.feedback)
      return
    case 'insertApproval':
      return insertApproval(db, write.row)
    case 'insertPolicyEvents':
      return insertPolicyEvents(db, write.rows)
    case 'insertRun':
      return insertRun(db, write.row)
    case 'startToolEffect':
      return startToolEffect(db, write.row)
    case 'completeToolEffect':
      await completeToolEffect(db, write.runId, write.step, write.position, write.resultJson, write.at)
      return
  }
}

/** The run row's columns a commit sets (the status only when the driver says it changed). */
const headUpdate = ({ status, ...rest }: TransitionCommit['head']) => (status === undefined ? rest : { ...rest, status: status as RunStatus })

/** The `RunWriter` of any dialect: each call one Kysely transaction, fenced by `checkFence`. */
export function kyselyRunWriter(db: Kysely<Database>): RunWriter {
  return {
    commit: (commit) =>
      db.transaction().execute(async (trx) => {
        await checkFence(trx, commit.runId, commit.leaseToken)
        for (const write of commit.writes) await applyRunWrite(trx, write)
        if (commit.transitions.length > 0) await appendJournalEntry(trx, journalEntry(commit.runId, commit.transitions, commit.snapshot))
        const updated = await trx
          .updateTable('runs')
          .set(headUpdate(commit.head))
          .where('id', '=', commit.runId)
          .where('lease_token', '=', commit.leaseToken)
          .executeTakeFirst()
        if (updated.numUpdatedRows === 0n) throw new LeaseLostError({ runId: commit.runId })
      }),
    createRun: async (row, lease) => {
      await insertRun(db, leasedRun(row, lease))
      return FIRST_LEASE_TOKEN
    },
    write: (runId, leaseToken, writes) =>
      db.transaction().execute(async (trx) => {
        await checkFence(trx, runId, leaseToken)
        for (const write of writes) await applyRunWrite(trx, write)
      }),
    approvals: (runId, step) => listApprovals(db, runId, step),
    toolEffects: (runId, step) => listToolEffects(db, runId, step),
    loadRun: async (runId) => {
      const run = await getRun(db, runId)
      if (run === undefined) return undefined
      const [last, steps] = await Promise.all([lastJournalEntry(db, runId), listSteps(db, runId)])
      return { run, last, steps }
    },
    acquireLease: (input) => acquireLease(db, input),
    attemptTotals: (runId) => runAttemptTotals(db, runId),
    releaseLease: (runId, leaseToken, usageJson) => releaseLease(db, runId, leaseToken, usageJson),
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
        return settlePendingAttempts(trx, runId, outcome, at)
      }),
    rememberedRules: (workspace) => listRememberedRules(db, workspace),
    lastStepText: (runId) => lastStepText(db, runId),
    close: async () => undefined
  }
}
