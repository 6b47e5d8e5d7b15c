// A narrow entry (`@agentvisor/store/runs`): the `runs` table and what reads it, for
// `agentvisor runs`, without the other tables' repositories the index also re-exports.
export type { Executor } from './executor.js'
export { isFinalStatus, RunStatus, type RunRow } from './tables/runs.table.js'
export { getRun, listRuns, type ListRunsOptions } from './repositories/runs.repository.js'
export { toRunRecord, type RunRecord } from './records/run-record.js'
export { isInterrupted } from './repositories/leases.repository.js'
