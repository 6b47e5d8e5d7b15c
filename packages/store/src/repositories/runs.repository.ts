import type { Effect } from 'effect/Effect'
import { sql } from 'kysely'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'
import { type ListRunsOptions, listRunsAsync, RUN_LIST_COLUMNS } from './run-list.repository.js'
import { decodeRunRow, decodeRunWithContract } from '../tables/runs.columns.js'
import type { NewRun, RunListRow, RunRow, RunUpdate, RunWithContract } from '../tables/runs.table.js'

/**
 * The columns `updateRun` may change. `updated_at` is required so that no write can forget to
 * move it; the key and the creation time never change.
 */
export type RunPatch = Omit<RunUpdate, 'id' | 'created_at' | 'updated_at'> & { readonly updated_at: string }

/**
 * Inserts a run row and its contract, in one transaction (its own unless `db` already is one).
 * Fails if the id exists or `parent_id` names no run.
 */
export const insertRun = (db: Executor, row: NewRun): Effect<void, StoreError> =>
  storeCall(
    () => `create run ${row.id}`,
    () => insertRunAsync(db, row)
  )

/** `insertRun` as a promise, for a transaction of the Kysely writer (run-writer.ts). */
export async function insertRunAsync(db: Executor, row: NewRun): Promise<void> {
  if (!db.isTransaction) return db.transaction().execute((trx) => insertRunAsync(trx, row))
  const { contract_json, ...run } = row
  await db.insertInto('runs').values(run).execute()
  await db.insertInto('run_contracts').values({ run_id: run.id, contract_json }).execute()
}

/** What {@link insertRunOnce} found under a run's id. */
export const RunCreation = {
  /** The row and its contract are written now. */
  created: 'created',
  /** A run with this id, this parent and this very contract is there already: nothing is written. */
  exists: 'exists',
  /** A run with this id is there with another parent or another contract: nothing is written. */
  differs: 'differs'
} as const
export type RunCreation = (typeof RunCreation)[keyof typeof RunCreation]

/**
 * Inserts a run row and its contract unless a run with its id exists, in one transaction (its
 * own unless `db` already is one): how a request that may arrive twice at once creates its run
 * (a submission sent again by a client that lost the reply, docs/nats.md "Submitting runs").
 * The insert gives way on the key (`on conflict do nothing`) instead of failing on it, so of
 * concurrent callers with one id exactly one is `created`, on SQLite and PostgreSQL alike; the
 * others compare the run that is there with theirs (its parent, and its contract as JSON, key
 * order aside). Fails only as `insertRun` does otherwise (a `parent_id` naming no run).
 */
export const insertRunOnce = (db: Executor, row: NewRun): Effect<RunCreation, StoreError> =>
  storeCall(
    () => `create run ${row.id}`,
    () => (db.isTransaction ? writeRunOnce(db, row) : db.transaction().execute((trx) => writeRunOnce(trx, row)))
  )

async function writeRunOnce(db: Executor, row: NewRun): Promise<RunCreation> {
  const { contract_json, ...run } = row
  const inserted = await db
    .insertInto('runs')
    .values(run)
    .onConflict((conflict) => conflict.column('id').doNothing())
    .returning('id')
    .executeTakeFirst()
  if (inserted !== undefined) {
    await db.insertInto('run_contracts').values({ run_id: run.id, contract_json }).execute()
    return RunCreation.created
  }
  // Under PostgreSQL's read committed, the insert waited for the transaction that holds the key
  // to commit, and this statement sees what it wrote.
  const there = await db
    .selectFrom('runs')
    .innerJoin('run_contracts', 'run_contracts.run_id', 'runs.id')
    .select(['runs.parent_id', 'run_contracts.contract_json'])
    .where('runs.id', '=', run.id)
    .executeTakeFirst()
  return there !== undefined && there.parent_id === (run.parent_id ?? null) && sameJson(there.contract_json, contract_json)
    ? RunCreation.exists
    : RunCreation.differs
}

/** Whether two JSON texts hold the same value, whatever the order of their keys; text that does not parse is the same as nothing. */
const sameJson = (a: string, b: string): boolean => {
  const canonical = (text: string): string | undefined => {
    try {
      return JSON.stringify(JSON.parse(text), (_key, value: unknown) =>
        value !== null && typeof value === 'object' && !Array.isArray(value)
          ? Object.fromEntries(Object.entries(value).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
          : value
      )
    } catch {
      return undefined
    }
  }
  const left = canonical(a)
  return left !== undefined && left === canonical(b)
}

/** Runs with their contracts (the contract lives in its own table). */
const withContracts = (db: Executor) =>
  db.selectFrom('runs').innerJoin('run_contracts', 'run_contracts.run_id', 'runs.id').selectAll('runs').select('run_contracts.contract_json')

/**
 * The run with this id and its contract, or `undefined`. Fails with `StoreError` when its error
 * or contract does not decode (docs/durability.md, "Corrupt rows").
 */
export const getRun = (db: Executor, id: string): Effect<RunWithContract | undefined, StoreError> =>
  storeCall(
    () => `load run ${id}`,
    () => getRunAsync(db, id)
  )

/** `getRun` as a promise, for the Kysely writer (run-writer.ts). */
export async function getRunAsync(db: Executor, id: string): Promise<RunWithContract | undefined> {
  const row = await withContracts(db).where('runs.id', '=', id).executeTakeFirst()
  return row === undefined ? undefined : decodeRunWithContract(row)
}

/**
 * The run with this id without its contract, or `undefined`: what a trace, a status or a cancel
 * reads, so that none of them depends on (or pays for) the contract.
 */
export const getRunRow = (db: Executor, id: string): Effect<RunRow | undefined, StoreError> =>
  storeCall(
    () => `load run ${id}`,
    async () => {
      const row = await db.selectFrom('runs').selectAll().where('id', '=', id).executeTakeFirst()
      return row === undefined ? undefined : decodeRunRow(row)
    }
  )

/** Runs oldest first (by `created_at`, then `id` so equal timestamps keep a stable order). */
export const listRuns = (db: Executor, options: ListRunsOptions = {}): Effect<RunListRow[], StoreError> =>
  storeCall('list runs', () => listRunsAsync(db, options))

/** The direct children of a run with their contracts, oldest first. */
export const listChildren = (db: Executor, parentId: string): Effect<RunWithContract[], StoreError> =>
  storeCall('load child runs', async () =>
    (await withContracts(db).where('runs.parent_id', '=', parentId).orderBy('runs.created_at').orderBy('runs.id').execute()).map(decodeRunWithContract)
  )

/** Applies `patch` to the run and answers the updated row, or `undefined` if there is no such run. */
export const updateRun = (db: Executor, id: string, patch: RunPatch): Effect<RunRow | undefined, StoreError> =>
  storeCall(
    () => `update run ${id}`,
    async () => {
      const row = await db.updateTable('runs').set(patch).where('id', '=', id).returningAll().executeTakeFirst()
      return row === undefined ? undefined : decodeRunRow(row)
    }
  )

/**
 * A run and every run below it (by `parent_id`), oldest first: what NATS `control.<run>.tree`
 * answers (docs/nats.md). Empty when there is no such run.
 */
export const listRunTree = (db: Executor, runId: string): Effect<RunListRow[], StoreError> =>
  storeCall(
    () => `load run ${runId}'s tree`,
    async () => {
      const rows =
        await sql<RunListRow>`with recursive tree (id) as (select id from runs where id = ${runId} union all select r.id from runs r join tree t on r.parent_id = t.id)
    select ${sql.join(RUN_LIST_COLUMNS.map((c) => sql.ref(`runs.${c}`)))} from runs join tree on runs.id = tree.id order by runs.created_at, runs.id`.execute(
          db
        )
      return rows.rows
    }
  )
