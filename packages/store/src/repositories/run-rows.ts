import { PostgresAdapter } from 'kysely'
import type { Executor } from '../executor.js'

/** The tables whose rows a step writes: on PostgreSQL they carry no foreign key to `runs`. */
export type StepTable = 'attempts' | 'steps' | 'journal_entries'

/**
 * Runs `insert` of rows of `runId` into `table` as its foreign key would have let it: on
 * PostgreSQL, where the keys of a step's tables are gone from the hot path (migration
 * 2026-12-02T160000: the commit functions' fence proves the run exists), the run's row is read
 * first in the same transaction under the lock a key takes (`for key share`, so a delete of the run
 * waits), and a run that does not exist is refused with the key's error. On SQLite the key is
 * there (`run_log`'s) and checks it itself.
 */
export async function insertForRun(db: Executor, table: StepTable, runId: string, insert: (db: Executor) => Promise<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) {
    await insert(db)
    return
  }
  if (!db.isTransaction) return db.transaction().execute((trx) => insertForRun(trx, table, runId, insert))
  const run = await db.selectFrom('runs').select('id').where('id', '=', runId).forKeyShare().executeTakeFirst()
  if (run === undefined) {
    // PostgreSQL's own words and code for a missing key, as before the migration.
    throw Object.assign(new Error(`insert or update on table "${table}" violates foreign key constraint "${table}_run_id_fkey": run ${runId} does not exist`), {
      code: '23503'
    })
  }
  await insert(db)
}
