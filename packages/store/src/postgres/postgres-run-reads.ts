import type { LoadedRun, RawRunWriter } from '../run-writer/run-writer.js'
import type { JournalHead } from '../repositories/journal-entries.repository.js'
import { RUN_ATTEMPT_TOTALS_GROUP, RUN_ATTEMPT_TOTALS_SELECT, type TotalsRow, totalsOf } from '../repositories/run-usage.repository.js'
import { decodeApprovalRow } from '../tables/approvals.columns.js'
import type { StoredApprovalRow } from '../tables/approvals.table.js'
import type { RememberedRuleRow } from '../tables/remembered-rules.table.js'
import { decodeRunWithContract } from '../tables/runs.columns.js'
import type { StoredRunRow } from '../tables/runs.table.js'
import { decodeStepRow } from '../tables/steps.columns.js'
import type { StoredStepRow } from '../tables/steps.table.js'
import { decodeToolEffectRow } from '../tables/tool-effects.columns.js'
import type { StoredToolEffectRow } from '../tables/tool-effects.table.js'
import { decodeRow, decodeRows, decodeText, encodeText } from '../text-codec.js'
import type { NamedQueries } from './named-queries.js'

/** What the PostgreSQL run writer reads: one named query each, rows back through the text codec. */
export type PostgresRunReads = Pick<
  RawRunWriter,
  'approvals' | 'rememberedRules' | 'lastStepText' | 'toolEffects' | 'loadRun' | 'attemptTotals' | 'attemptRecorded'
>

export const postgresRunReads = ({ query }: NamedQueries): PostgresRunReads => ({
  approvals: async (runId, step) =>
    decodeRows(
      await query<StoredApprovalRow>(
        'agentvisor_approvals',
        'SELECT * FROM approvals WHERE run_id = $1 AND step = $2 ORDER BY step, position, created_at, id',
        [encodeText(runId), step]
      )
    ).map(decodeApprovalRow),
  rememberedRules: async (workspace) =>
    decodeRows(
      await query<RememberedRuleRow>('agentvisor_remembered_rules', 'SELECT * FROM remembered_rules WHERE workspace = $1 ORDER BY created_at, act, pattern', [
        encodeText(workspace)
      ])
    ),
  lastStepText: async (runId) => {
    const [row] = await query<{ text: string }>(
      'agentvisor_last_step_text',
      "SELECT text FROM steps WHERE run_id = $1 AND text != '' ORDER BY step DESC LIMIT 1",
      [encodeText(runId)]
    )
    return row === undefined ? undefined : decodeText(row.text)
  },
  toolEffects: async (runId, step) =>
    decodeRows(
      await query<StoredToolEffectRow>('agentvisor_tool_effects', 'SELECT * FROM tool_effects WHERE run_id = $1 AND step = $2 ORDER BY step, position', [
        encodeText(runId),
        step
      ])
    ).map(decodeToolEffectRow),
  loadRun: async (runId) => {
    // One query: the run with its contract, its last journal entry's snapshot, its steps, each
    // as JSON (`pg` parses it; numbers stay numbers, as the pool's parsers give them).
    const [row] = await query<{ run: (StoredRunRow & { contract_json: string }) | null; last: JournalHead | null; steps: StoredStepRow[] }>(
      'agentvisor_load_run',
      `SELECT
           (SELECT row_to_json(r) FROM (SELECT runs.*, c.contract_json FROM runs JOIN run_contracts c ON c.run_id = runs.id WHERE runs.id = $1) r) AS run,
           (SELECT row_to_json(t) FROM (SELECT seq, snapshot_json FROM journal_entries WHERE run_id = $1 ORDER BY seq DESC LIMIT 1) t) AS last,
           (SELECT coalesce(json_agg(s ORDER BY s.step), '[]') FROM steps s WHERE s.run_id = $1) AS steps`,
      [encodeText(runId)]
    )
    if (row?.run == null) return undefined
    // The JSON columns decode through their Schemas; a corrupt one throws StoreError
    // (docs/durability.md, "Corrupt rows").
    const loaded: LoadedRun = {
      run: decodeRunWithContract(decodeRow(row.run)),
      last: row.last === null ? undefined : decodeRow(row.last),
      steps: decodeRows(row.steps).map(decodeStepRow)
    }
    return loaded
  },
  attemptTotals: async (runId) =>
    totalsOf(
      decodeRows(
        await query<TotalsRow>('agentvisor_attempt_totals', `${RUN_ATTEMPT_TOTALS_SELECT} FROM attempts WHERE run_id = $1 ${RUN_ATTEMPT_TOTALS_GROUP}`, [
          encodeText(runId)
        ])
      )
    ),
  attemptRecorded: async (runId, step, attempt) =>
    (await query('agentvisor_attempt_recorded', 'SELECT 1 FROM attempts WHERE run_id = $1 AND step = $2 AND attempt = $3', [encodeText(runId), step, attempt]))
      .length > 0
})
