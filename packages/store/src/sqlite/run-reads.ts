import type { LoadedRun } from '../run-writer/run-writer.js'
import type { JournalHead } from '../repositories/journal-entries.repository.js'
import { RUN_ATTEMPT_TOTALS_GROUP, RUN_ATTEMPT_TOTALS_SELECT, type AttemptTotals, type TotalsRow, totalsOf } from '../repositories/run-usage.repository.js'
import type { ApprovalRow, StoredApprovalRow } from '../tables/approvals.table.js'
import { decodeApprovalRow } from '../tables/approvals.columns.js'
import type { RememberedRuleRow } from '../tables/remembered-rules.table.js'
import type { StoredRunRow } from '../tables/runs.table.js'
import { decodeRunWithContract } from '../tables/runs.columns.js'
import type { StoredStepRow } from '../tables/steps.table.js'
import { decodeStepRow } from '../tables/steps.columns.js'
import type { StoredToolEffectRow, ToolEffectRow } from '../tables/tool-effects.table.js'
import { decodeToolEffectRow } from '../tables/tool-effects.columns.js'
import { decodeRow, decodeRows, decodeText, encodeText } from '../text-codec.js'
import type { PreparedStatements } from './prepared-statements.js'

/** What the SQLite run writer reads, synchronously, on its own connection. */
export interface SqliteRunReads {
  /** A run with its contract, last journal entry and steps: what a resume restores. */
  readonly loadRun: (runId: string) => LoadedRun | undefined
  /** The run's receipts summed by provider and outcome (`runAttemptTotals`). */
  readonly attemptTotals: (runId: string) => AttemptTotals[]
  /** Whether the receipt of this attempt exists (in whatever outcome). */
  readonly attemptRecorded: (runId: string, step: number, attempt: number) => boolean
  /** The approval requests of one step, as `listApprovals` orders them. */
  readonly approvals: (runId: string, step: number) => ApprovalRow[]
  /** The decisions remembered for a workspace, as `listRememberedRules` orders them. */
  readonly rememberedRules: (workspace: string) => RememberedRuleRow[]
  /** The text of the run's last step that answered with text, or undefined. */
  readonly lastStepText: (runId: string) => string | undefined
  /** The tool journal of one step, by position. */
  readonly toolEffects: (runId: string, step: number) => ToolEffectRow[]
}

/**
 * The reads of a run's driver as cached statements (`statement`): of `run_log` by its key
 * `(run_id, step, kind, n)`, with the columns the old tables had (docs/durability.md, "How a run
 * is stored"), and of the tables. The JSON columns are decoded here, on read, through their
 * Schemas (docs/durability.md, "Corrupt rows"); a corrupt one throws StoreError. Writes are never
 * re-validated.
 */
export function sqliteRunReads(statement: PreparedStatements['statement']): SqliteRunReads {
  return {
    loadRun: (runId) => {
      const run = statement(RUN_WITH_CONTRACT).get(runId) as (StoredRunRow & { contract_json: string }) | undefined
      if (run === undefined) return undefined
      // The run's last entry: one seek to the end of its range, then back past the few rows after it.
      const last = statement(LAST_ENTRY).get(runId) as JournalHead | undefined
      const steps = statement(STEPS).all(runId) as StoredStepRow[]
      return { run: decodeRunWithContract(decodeRow(run)), last: decodeRow(last), steps: decodeRows(steps).map(decodeStepRow) }
    },
    attemptTotals: (runId) => totalsOf(decodeRows(statement(ATTEMPT_TOTALS).all(encodeText(runId)) as TotalsRow[])),
    attemptRecorded: (runId, step, attempt) => statement(ATTEMPT_RECORDED).get(runId, step, attempt) !== undefined,
    approvals: (runId, step) => decodeRows(statement(APPROVALS).all(runId, step) as StoredApprovalRow[]).map(decodeApprovalRow),
    rememberedRules: (workspace) => decodeRows(statement(REMEMBERED_RULES).all(encodeText(workspace)) as RememberedRuleRow[]),
    lastStepText: (runId) => {
      const row = statement(LAST_STEP_TEXT).get(encodeText(runId)) as { text: string } | undefined
      return row === undefined ? undefined : decodeText(row.text)
    },
    toolEffects: (runId, step) => decodeRows(statement(TOOL_EFFECTS).all(runId, step) as StoredToolEffectRow[]).map(decodeToolEffectRow)
  }
}

const RUN_WITH_CONTRACT = 'SELECT runs.*, run_contracts.contract_json FROM runs JOIN run_contracts ON run_contracts.run_id = runs.id WHERE runs.id = ?'
const LAST_ENTRY = "SELECT n AS seq, snapshot_json FROM run_log WHERE run_id = ? AND kind = 'j' ORDER BY step DESC, kind DESC, n DESC LIMIT 1"
const STEPS =
  "SELECT run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at FROM run_log WHERE run_id = ? AND kind = 's' ORDER BY step"
const ATTEMPT_TOTALS = `${RUN_ATTEMPT_TOTALS_SELECT} FROM run_log WHERE run_id = ? AND kind = 'a' ${RUN_ATTEMPT_TOTALS_GROUP}`
const ATTEMPT_RECORDED = "SELECT 1 FROM run_log WHERE run_id = ? AND step = ? AND kind = 'a' AND n = ?"
const APPROVALS = 'SELECT * FROM approvals WHERE run_id = ? AND step = ? ORDER BY step, position, created_at, id'
const REMEMBERED_RULES = 'SELECT * FROM remembered_rules WHERE workspace = ? ORDER BY created_at, act, pattern'
const LAST_STEP_TEXT = "SELECT text FROM run_log WHERE run_id = ? AND kind = 's' AND text != '' ORDER BY step DESC LIMIT 1"
const TOOL_EFFECTS =
  "SELECT run_id, step, n AS position, tool_call_id, name, arguments, status, result_json, started_at, completed_at FROM run_log WHERE run_id = ? AND step = ? AND kind = 't' ORDER BY n"
