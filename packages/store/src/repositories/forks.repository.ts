import { randomUUID } from 'node:crypto'
import type { Effect } from 'effect/Effect'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'
import type { NewJournalEntry } from '../tables/journal-entries.table.js'
import type { RunStatus } from '../tables/runs.table.js'

/** What a fork copies of its original (docs/cli.md, `fork`): worked out by the caller from the journal. */
export interface ForkPlan {
  /** The original run, and the fork's new id. */
  readonly from: string
  readonly to: string
  /** The seq forked at, and its transition's time: nothing stamped later is copied. */
  readonly seq: number
  readonly at: string
  /** The fork's creation time (its timeout counts from it). */
  readonly now: string
  readonly goal: string
  readonly status: RunStatus
  readonly state: string
  readonly contractJson: string
  /** The fork's journal: the original's entries up to `seq`, the last one ending at it. */
  readonly entries: ReadonlyArray<NewJournalEntry>
  /** The steps answered by `seq`: copied with their receipts. */
  readonly answered: number
  /** The last answered step's tools had not run by `seq`: its results are not copied. */
  readonly toolsPending: boolean
  /** The last answered step's feedback was given by `seq` (a failed verify before a new dispatch). */
  readonly feedbackGiven: boolean
}

/**
 * Writes a fork in one transaction: its run row (a root, naming its original and seq), its
 * contract, its journal, and the original's steps, receipts, requests and policy events as they
 * stood at `seq`. A request decided after `seq` is copied pending: the fork asks it again. Tool
 * effects are not copied: the fork performs its own.
 */
export const insertFork = (db: Executor, plan: ForkPlan): Effect<void, StoreError> =>
  storeCall(
    () => `fork run ${plan.from}`,
    () => (db.isTransaction ? writeFork(db, plan) : db.transaction().execute((trx) => writeFork(trx, plan)))
  )

async function writeFork(db: Executor, plan: ForkPlan): Promise<void> {
  const { from, to, at } = plan
  await db
    .insertInto('runs')
    .values({
      id: to,
      parent_id: null,
      root_id: null,
      status: plan.status,
      goal: plan.goal,
      state: plan.state,
      steps: plan.answered,
      error_json: null,
      created_at: plan.now,
      updated_at: plan.now,
      ended_at: null,
      forked_from_run: from,
      forked_from_seq: plan.seq
    })
    .execute()
  await db.insertInto('run_contracts').values({ run_id: to, contract_json: plan.contractJson }).execute()
  if (plan.entries.length > 0)
    await db
      .insertInto('journal_entries')
      .values([...plan.entries])
      .execute()

  const steps = await db.selectFrom('steps').selectAll().where('run_id', '=', from).where('step', '<=', plan.answered).orderBy('step').execute()
  for (const step of steps) {
    const last = step.step === plan.answered
    await db
      .insertInto('steps')
      .values({
        ...step,
        run_id: to,
        results_json: last && plan.toolsPending ? null : step.results_json,
        feedback: last && !plan.feedbackGiven ? null : step.feedback
      })
      .execute()
  }
  const attempts = await db.selectFrom('attempts').selectAll().where('run_id', '=', from).where('step', '<=', plan.answered).execute()
  if (attempts.length > 0)
    await db
      .insertInto('attempts')
      .values(attempts.map((attempt) => ({ ...attempt, run_id: to })))
      .execute()

  const ids = new Map<string, string>()
  const requests = await db.selectFrom('approvals').selectAll().where('run_id', '=', from).where('created_at', '<=', at).orderBy('created_at').execute()
  for (const request of requests) {
    const id = randomUUID()
    ids.set(request.id, id)
    const decided = request.decided_at !== null && request.decided_at <= at
    await db
      .insertInto('approvals')
      .values(
        decided
          ? { ...request, id, run_id: to }
          : {
              ...request,
              id,
              run_id: to,
              status: 'pending',
              source: null,
              remember: 0,
              edited_payload_json: null,
              decided_at: null,
              resolution: null,
              account: null
            }
      )
      .execute()
  }
  const events = await db.selectFrom('policy_events').selectAll().where('run_id', '=', from).where('at', '<=', at).orderBy('id').execute()
  for (const { id: _id, ...event } of events) {
    await db
      .insertInto('policy_events')
      .values({ ...event, run_id: to, request_id: event.request_id === null ? null : (ids.get(event.request_id) ?? null) })
      .execute()
  }
}

/** The runs forked from `runId`, oldest first: `[{id, seq}]`. */
export const listForks = (db: Executor, runId: string): Effect<Array<{ readonly id: string; readonly seq: number }>, StoreError> =>
  storeCall(
    () => `load the forks of run ${runId}`,
    async () => {
      const rows = await db
        .selectFrom('runs')
        .select(['id', 'forked_from_seq', 'created_at'])
        .where('forked_from_run', '=', runId)
        .orderBy('created_at')
        .orderBy('id')
        .execute()
      return rows.map((row) => ({ id: row.id, seq: row.forked_from_seq ?? 0 }))
    }
  )
