// A narrow entry (`@agentvisor/store/runs`): the `runs` table and what reads it, for
// `agentvisor runs`, without the other tables' repositories the index also re-exports. Nothing
// here loads Kysely or Effect at run time: a current SQLite store is read with better-sqlite3.
export type { Executor } from './executor.js'
export { isFinalStatus, RunStatus, type RunListRow } from './tables/runs.table.js'
// `listRuns` as a promise: the store's `listRuns` (the index's) is an Effect, which this entry must not load.
export { listRunsAsync, RUN_LIST_COLUMNS, type ListRunsOptions } from './repositories/run-list.repository.js'
export { recordedUsage, toRunRecord, type RecordedUsage, type RunRecord } from './records/run-record.js'
export { isInterrupted } from './repositories/lease-owner.js'
export { openCurrentSqlite } from './sqlite/sqlite-reader.js'
export { decodeJsonText, decodeRows } from './text-codec.js'
export { resolveDbPath, DB_ENV_VAR } from './resolve-db-path.js'
export { isPostgresUrl } from './postgres/postgres-location.js'
