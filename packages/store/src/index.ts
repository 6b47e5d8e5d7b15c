export type { Database } from './database.js'
export type { Executor } from './executor.js'
export { LeaseConflictError, LeaseLostError, StoreError } from './errors.js'
export { type Eventually, fencedCall, StoreCall, storeCall, type What } from './store-call.js'
export { openStore, type OpenStoreOptions, type Store } from './open-store.js'
export { resolveDbPath, DB_ENV_VAR } from './resolve-db-path.js'
export { migrations, migrationProvider } from './migrations/index.js'
export { newRunId } from './run-id.js'

export {
  isFinalStatus,
  RunStatus,
  type RunsTable,
  type RunContractsTable,
  type RunListRow,
  type RunRow,
  type RunWithContract,
  type NewRun,
  type RunUpdate
} from './tables/runs.table.js'
export type { TransitionsTable, TransitionRow, NewTransition } from './tables/transitions.table.js'
export type { JournalEntriesTable, JournalEntryRow, NewJournalEntry, JournalTransition } from './tables/journal-entries.table.js'
export type { StepsTable, StepRow, StepToolResult, NewStep } from './tables/steps.table.js'
export {
  AttemptReason,
  AttemptOutcome,
  type SettledAttemptOutcome,
  type AttemptsTable,
  type AttemptRow,
  type NewAttempt,
  type AttemptSettlement
} from './tables/attempts.table.js'

export {
  insertRun,
  insertRunOnce,
  RunCreation,
  getRun,
  getRunRow,
  listRuns,
  listChildren,
  updateRun,
  listRunTree,
  type RunPatch
} from './repositories/runs.repository.js'
export type { ListRunsOptions } from './repositories/run-list.repository.js'
export { appendTransition, listTransitions, lastTransition } from './repositories/transitions.repository.js'
export {
  appendJournalEntry,
  journalEntry,
  listJournalEntries,
  lastJournalEntry,
  type JournalHead
} from './repositories/journal-entries.repository.js'
export { insertStep, setStepResults, setStepFeedback, listSteps, lastStepText } from './repositories/steps.repository.js'
export {
  insertAttempt,
  settleAttempt,
  keepPartialText,
  listAttempts,
  settlePendingAttempts,
  countProviderDispatches,
  countTreeDispatches
} from './repositories/attempts.repository.js'
export {
  type AttemptTotals,
  type PendingAttempt,
  runAttemptTotals,
  runContracts,
  totalsOf,
  type TotalsRow,
  treeAttemptTotals,
  treePendingAttempts
} from './repositories/run-usage.repository.js'
export { recordedUsage, toRunRecord, type RecordedUsage, type RunRecord } from './records/run-record.js'
export { RunErrorJson, ContractJson } from './tables/runs.columns.js'
export { ToolCallsJson, ResultsJson } from './tables/steps.columns.js'
export { PayloadJson, EditedPayloadJson } from './tables/approvals.columns.js'
export { ToolEffectResultJson } from './tables/tool-effects.columns.js'
export * from './tables/approvals.table.js'
export * from './tables/policy-events.table.js'
export * from './tables/remembered-rules.table.js'
export {
  answerApproval,
  type ApprovalDecision,
  closeOpenRequests,
  decideApproval,
  getApproval,
  insertApproval,
  listApprovals,
  recordDecision
} from './repositories/approvals.repository.js'
export { insertPolicyEvents, listPolicyEvents } from './repositories/policy-events.repository.js'
export { listRememberedRules, rememberRule } from './repositories/remembered-rules.repository.js'
export * from './tables/tool-effects.table.js'
export { completeToolEffect, listToolEffects, type StartedToolEffect, startToolEffect } from './repositories/tool-effects.repository.js'
export {
  acquireLease,
  clearCancelRequest,
  isCancelRequested,
  type LeaseAcquisition,
  type LeaseHolder,
  type LeaseRequest,
  releaseLease,
  renewLease,
  requestCancel
} from './repositories/leases.repository.js'
export { isAbandonedOwner, isInterrupted, isOwnedByThisProcess, makeLeaseOwner } from './repositories/lease-owner.js'
export type { RunWrite, RunHead, TransitionCommit } from './run-writer/run-write.js'
export { FIRST_LEASE_TOKEN, type RunWriter, type LoadedRun, type BatchOption, type NewLease } from './run-writer/run-writer.js'
export {
  kyselyRunWriter,
  makeRunWriter,
  type OutageRidingWriter,
  outageRidingWriter,
  postgresRunWriter,
  sqliteRunWriter
} from './run-writer/make-run-writer.js'
export { isStoreOutage } from './outage/store-outage.js'
export { DEFAULT_STORE_OUTAGE_MS, type StoreOutagePolicy } from './outage/outage-writer.js'
export { renewLeasesOf, leaseStates, type LeaseState } from './repositories/lease-keeping.repository.js'
export { dialectOf, type StoreDialect } from './dialect.js'
export { isPostgresUrl, redactPassword } from './postgres/postgres-location.js'
export { type ForkPlan, insertFork, listForks } from './repositories/forks.repository.js'
