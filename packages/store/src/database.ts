import type { ApprovalsTable } from './tables/approvals.table.js'
import type { JournalEntriesTable } from './tables/journal-entries.table.js'
import type { AttemptsTable } from './tables/attempts.table.js'
import type { PolicyEventsTable } from './tables/policy-events.table.js'
import type { RememberedRulesTable } from './tables/remembered-rules.table.js'
import type { RunContractsTable, RunsTable } from './tables/runs.table.js'
import type { StepsTable } from './tables/steps.table.js'
import type { ToolEffectsTable } from './tables/tool-effects.table.js'
import type { TransitionsTable } from './tables/transitions.table.js'

/** Every table of the store, as Kysely sees them. The migrations are the schema's source of truth. */
export interface Database {
  runs: RunsTable
  run_contracts: RunContractsTable
  journal_entries: JournalEntriesTable
  /** A read-only view of `journal_entries`, one row per transition. */
  transitions: TransitionsTable
  steps: StepsTable
  attempts: AttemptsTable
  approvals: ApprovalsTable
  policy_events: PolicyEventsTable
  remembered_rules: RememberedRulesTable
  tool_effects: ToolEffectsTable
}
