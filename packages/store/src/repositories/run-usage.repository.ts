import type { TaskContract } from '@agentvisor/core'
import type { Effect } from 'effect/Effect'
import { sql } from 'kysely'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'
import { decodeContractJson } from '../tables/runs.columns.js'
import type { AttemptOutcome } from '../tables/attempts.table.js'

/**
 * The receipts of one run, or of a run and all its descendants, summed by run, provider and
 * outcome: what usage totals and budget checks are made of (docs/task-file.md, "Usage and
 * budgets"). `tokensIn`/`tokensOut` sum what the providers reported (a receipt without a figure
 * adds nothing); `attempts` counts the receipts.
 */
export interface AttemptTotals {
  readonly runId: string
  readonly provider: string
  readonly outcome: AttemptOutcome
  readonly tokensIn: number
  readonly tokensOut: number
  readonly attempts: number
}

/** A pending receipt of a tree: a call in flight (or lost with a crash, until recovery settles it). */
export interface PendingAttempt {
  readonly runId: string
  readonly step: number
  readonly attempt: number
}

/** A row of receipts summed by run, provider and outcome, as the store gives it (a sum may come as text). */
export interface TotalsRow {
  run_id: string
  provider: string
  outcome: AttemptOutcome
  tokens_in: number | string | null
  tokens_out: number | string | null
  attempts: number | string
}

/** `AttemptTotals` of summed rows. */
export const totalsOf = (rows: ReadonlyArray<TotalsRow>): AttemptTotals[] =>
  rows.map((row) => ({
    runId: row.run_id,
    provider: row.provider,
    outcome: row.outcome,
    tokensIn: Number(row.tokens_in ?? 0),
    tokensOut: Number(row.tokens_out ?? 0),
    attempts: Number(row.attempts)
  }))

/** The run `runId` and every run below it, by `parent_id` (indexed). */
const treeOf = (runId: string) =>
  sql`with recursive tree (id) as (select id from runs where id = ${runId} union all select r.id from runs r join tree t on r.parent_id = t.id)`

/** The sums of `runAttemptTotals`, which the run writers' statements share. */
export const RUN_ATTEMPT_TOTALS_SELECT = 'select run_id, provider, outcome, sum(tokens_in) as tokens_in, sum(tokens_out) as tokens_out, count(*) as attempts'
export const RUN_ATTEMPT_TOTALS_GROUP = 'group by run_id, provider, outcome'

/**
 * The receipts of `runId` alone, summed by provider and outcome. A driver resuming a run reads
 * them through its run writer (`RunWriter.attemptTotals`), with the same sums.
 */
export const runAttemptTotals = (db: Executor, runId: string): Effect<AttemptTotals[], StoreError> =>
  storeCall(
    () => `sum the receipts of run ${runId}`,
    () => runAttemptTotalsAsync(db, runId)
  )

/** `runAttemptTotals` as a promise, for the Kysely writer (run-writer.ts). */
export async function runAttemptTotalsAsync(db: Executor, runId: string): Promise<AttemptTotals[]> {
  const rows = await sql<TotalsRow>`${sql.raw(RUN_ATTEMPT_TOTALS_SELECT)} from attempts where run_id = ${runId} ${sql.raw(RUN_ATTEMPT_TOTALS_GROUP)}`.execute(
    db
  )
  return totalsOf(rows.rows)
}

/** The receipts of `runId` and of every run below it, summed by run, provider and outcome. */
export const treeAttemptTotals = (db: Executor, runId: string): Effect<AttemptTotals[], StoreError> =>
  storeCall(
    () => `sum the receipts of run ${runId}'s tree`,
    async () => {
      const rows = await sql<TotalsRow>`${treeOf(runId)}
    select a.run_id, a.provider, a.outcome, sum(a.tokens_in) as tokens_in, sum(a.tokens_out) as tokens_out, count(*) as attempts
    from attempts a join tree t on a.run_id = t.id group by a.run_id, a.provider, a.outcome`.execute(db)
      return totalsOf(rows.rows)
    }
  )

/** The pending receipts of `runId` and every run below it. */
export const treePendingAttempts = (db: Executor, runId: string): Effect<PendingAttempt[], StoreError> =>
  storeCall(
    () => `read the calls in flight of run ${runId}'s tree`,
    async () => {
      const rows = await sql<{ run_id: string; step: number; attempt: number }>`${treeOf(runId)}
    select a.run_id, a.step, a.attempt from attempts a join tree t on a.run_id = t.id where a.outcome = 'pending'`.execute(db)
      return rows.rows.map((row) => ({ runId: row.run_id, step: Number(row.step), attempt: Number(row.attempt) }))
    }
  )

/**
 * The contracts of these runs, by id (a run that does not exist is left out). Fails with
 * `StoreError` when one does not decode.
 */
export const runContracts = (db: Executor, runIds: ReadonlyArray<string>): Effect<Map<string, TaskContract>, StoreError> =>
  storeCall(
    () => `read the contracts of ${runIds.length} runs`,
    async () => {
      const contracts = new Map<string, TaskContract>()
      if (runIds.length === 0) return contracts
      const rows = await db.selectFrom('run_contracts').select(['run_id', 'contract_json']).where('run_id', 'in', runIds).execute()
      for (const row of rows) contracts.set(row.run_id, decodeContractJson(row.run_id, row.contract_json))
      return contracts
    }
  )
