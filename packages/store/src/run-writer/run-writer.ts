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
import { appendTransition } from '../repositories/transitions.repository.js'
import type { ApprovalRow } from '../tables/approvals.table.js'
import type { RunStatus } from '../tables/runs.table.js'
import type { ToolEffectRow } from '../tables/tool-effects.table.js'
import type { RunWrite, TransitionCommit } from './run-write.js'

/** A value now (the SQLite hot path) or later (any other dialect). */
export type Eventually<A> = A | Promise<A>

/**
 * The writes and reads a run's driver makes at every step, behind one interface so that SQLite
 * can do them synchronously with prepared statements while other dialects go through Kysely.
 * Every fenced method rejects (or throws) `LeaseLostError` when `leaseToken` is no longer the
 * run's: a superseded driver writes nothing.
 */
export interface RunWriter {
  /** Commits transitions, their step data and the run's new head in one transaction. */
  readonly commit: (commit: TransitionCommit) => Eventually<void>
  /** Fenced writes outside a transition (a receipt before its dispatch, journal entries). */
  readonly write: (runId: string, leaseToken: number, writes: ReadonlyArray<RunWrite>) => Eventually<void>
  /** The approval requests of one step, as `listApprovals` orders them. */
  readonly approvals: (runId: string, step: number) => Eventually<ApprovalRow[]>
  /** The tool journal of one step, by position. */
  readonly toolEffects: (runId: string, step: number) => Eventually<ToolEffectRow[]>
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

/** The `RunWriter` of any dialect: each call one Kysely transaction, fenced by `checkFence`. */
export function kyselyRunWriter(db: Kysely<Database>): RunWriter {
  return {
    commit: (commit) =>
      db.transaction().execute(async (trx) => {
        await checkFence(trx, commit.runId, commit.leaseToken)
        for (const write of commit.writes) await applyRunWrite(trx, write)
        for (const transition of commit.transitions) await appendTransition(trx, transition)
        const updated = await trx
          .updateTable('runs')
          .set({ ...commit.head, status: commit.head.status as RunStatus })
          .where('id', '=', commit.runId)
          .where('lease_token', '=', commit.leaseToken)
          .executeTakeFirst()
        if (updated.numUpdatedRows === 0n) throw new LeaseLostError({ runId: commit.runId })
      }),
    write: (runId, leaseToken, writes) =>
      db.transaction().execute(async (trx) => {
        await checkFence(trx, runId, leaseToken)
        for (const write of writes) await applyRunWrite(trx, write)
      }),
    approvals: (runId, step) => listApprovals(db, runId, step),
    toolEffects: (runId, step) => listToolEffects(db, runId, step)
  }
}
