import { sql } from 'kysely'
import { dialectOf } from '../dialect.js'
import type { Executor } from '../executor.js'
import { insertForRun } from './run-rows.js'
import { AttemptOutcome, type AttemptRow, type AttemptSettlement, type NewAttempt, type SettledAttemptOutcome } from '../tables/attempts.table.js'

/**
 * What an update of a per-step table returns to be counted. On SQLite those tables are views of
 * `run_log` written through INSTEAD OF triggers (docs/durability.md, "How a run is stored"), and
 * SQLite counts no change a trigger makes as the statement's; RETURNING lists the rows either way.
 */
export const UPDATED = 'run_id' as const

/** Writes the receipt of a model call before it is dispatched, as `pending`. */
export async function insertAttempt(db: Executor, row: NewAttempt): Promise<void> {
  await insertForRun(db, 'attempts', row.run_id, (db) =>
    db
      .insertInto('attempts')
      .values({ ...row, outcome: AttemptOutcome.pending, settled_at: null })
      .execute()
  )
}

/**
 * Keeps what a pending receipt's call has streamed so far in its `partial_text` (docs/streaming.md,
 * "Text"); false when the receipt is no longer pending (a takeover settled it). On SQLite the row
 * is written in `run_log` itself, as the run writer writes it, not through the `attempts` view's
 * trigger, which rewrites every column of the row (docs/durability.md, "How a run is stored").
 */
export async function keepPartialText(db: Executor, runId: string, step: number, attempt: number, text: string): Promise<boolean> {
  if (dialectOf(db) === 'sqlite') {
    const kept = await sql<{ run_id: string }>`update run_log set partial_text = ${text}
      where run_id = ${runId} and step = ${step} and kind = 'a' and n = ${attempt} and outcome = 'pending' returning run_id`.execute(db)
    return kept.rows.length > 0
  }
  const kept = await db
    .updateTable('attempts')
    .set({ partial_text: text })
    .where('run_id', '=', runId)
    .where('step', '=', step)
    .where('attempt', '=', attempt)
    .where('outcome', '=', AttemptOutcome.pending)
    .returning(UPDATED)
    .execute()
  return kept.length > 0
}

/**
 * Settles a pending receipt with the call's outcome. Returns false, changing nothing, when the
 * receipt does not exist or is already settled: a settled receipt is history and is never
 * rewritten (a late settle after resume marked it `unknown` must not overwrite that).
 */
export async function settleAttempt(db: Executor, runId: string, step: number, attempt: number, patch: AttemptSettlement): Promise<boolean> {
  // Counted by RETURNING: on SQLite `attempts` is a view, whose writes SQLite does not count (see UPDATED).
  const updated = await db
    .updateTable('attempts')
    .set(patch)
    .where('run_id', '=', runId)
    .where('step', '=', step)
    .where('attempt', '=', attempt)
    .where('outcome', '=', AttemptOutcome.pending)
    .returning(UPDATED)
    .execute()
  return updated.length > 0
}

/** A run's receipts by step, then attempt. */
export async function listAttempts(db: Executor, runId: string, fromStep = 1): Promise<AttemptRow[]> {
  let query = db.selectFrom('attempts').selectAll().where('run_id', '=', runId)
  if (fromStep > 1) query = query.where('step', '>=', fromStep)
  return query.orderBy('step').orderBy('attempt').execute()
}

/**
 * Settles every still-pending receipt of a run (on resume: the calls in flight when the process
 * died may or may not have reached the provider, so they become `unknown`). Returns how many.
 */
export async function settlePendingAttempts(
  db: Executor,
  runId: string,
  outcome: SettledAttemptOutcome,
  settledAt: string = new Date().toISOString()
): Promise<number> {
  const updated = await db
    .updateTable('attempts')
    .set({ outcome, settled_at: settledAt })
    .where('run_id', '=', runId)
    .where('outcome', '=', AttemptOutcome.pending)
    .returning(UPDATED)
    .execute()
  return updated.length
}

/**
 * The dispatches of one run by provider name (skipped providers, whose circuit was open, are not
 * dispatches; a call lost with a crash is one): where each provider of a resumed run stands, so
 * a `scripted` one plays its next step in the process that resumes it (docs/task-file.md, "Providers").
 */
export async function countProviderDispatches(db: Executor, runId: string): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('attempts')
    .select((eb) => ['provider', eb.fn.countAll<number>().as('n')])
    .where('run_id', '=', runId)
    .where((eb) => eb.or([eb('error_message', 'is', null), eb('error_message', '!=', 'circuit open')]))
    .groupBy('provider')
    .execute()
  return new Map(rows.map((row) => [row.provider, Number(row.n)]))
}

/**
 * Provider dispatches of a whole run tree (skipped providers, whose circuit was open, are not
 * dispatches): the number the tree's shared ceiling is checked against.
 */
export async function countTreeDispatches(db: Executor, rootId: string): Promise<number> {
  const row = await db
    .selectFrom('attempts')
    .innerJoin('runs', 'runs.id', 'attempts.run_id')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where((eb) => eb.or([eb('runs.root_id', '=', rootId), eb('runs.id', '=', rootId)]))
    .where((eb) => eb.or([eb('attempts.error_message', 'is', null), eb('attempts.error_message', '!=', 'circuit open')]))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}
