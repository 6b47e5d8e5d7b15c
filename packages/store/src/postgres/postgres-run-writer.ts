import type { RememberedRuleRow } from '../tables/remembered-rules.table.js'
import type { Pool, QueryResultRow } from 'pg'
import { LeaseLostError } from '../errors.js'
import type { RunWrite } from '../run-writer/run-write.js'
import { FIRST_LEASE_TOKEN, type LeaseRequest, type LoadedRun, leasedRun, type RunWriter } from '../run-writer/run-writer.js'
import type { LeaseAcquisition } from '../repositories/leases.repository.js'
import type { JournalHead } from '../repositories/journal-entries.repository.js'
import { decodeApprovalRow } from '../tables/approvals.columns.js'
import type { StoredApprovalRow } from '../tables/approvals.table.js'
import { decodeRunWithContract } from '../tables/runs.columns.js'
import type { StoredRunRow } from '../tables/runs.table.js'
import { decodeStepRow } from '../tables/steps.columns.js'
import type { StoredStepRow } from '../tables/steps.table.js'
import { decodeToolEffectRow } from '../tables/tool-effects.columns.js'
import type { StoredToolEffectRow } from '../tables/tool-effects.table.js'
import { decodeRow, decodeRows, decodeText, encodeText } from '../text-codec.js'
import { COMMIT_STEP, COMMIT_STEP_DEFERRED, commitArguments, writesJson } from './postgres-commit-arguments.js'
import { textOrNull } from '../run-writer/bound-values.js'
import { RUN_ATTEMPT_TOTALS_GROUP, RUN_ATTEMPT_TOTALS_SELECT, type TotalsRow, totalsOf } from '../repositories/run-usage.repository.js'

/** What the store's functions raise for a superseded driver (the 2026-12-01 migration). */
const LEASE_LOST = 'AVL01'

/**
 * The PostgreSQL `RunWriter`: every call one statement on the store's `pg` pool, one round trip.
 * A commit is a call of `agentvisor_commit`, a plpgsql function installed by the migrations
 * `2026-12-01T130000-postgres-run-writer` and `2026-12-01T170000-postgres-step-commit`, which
 * folds the fence into the head's UPDATE (as the SQLite writer does; a commit that leaves the
 * row for later calls `agentvisor_commit_deferred`, 2026-12-02T010000) and applies the writes
 * server-side, a step's own writes as typed arguments (postgres-commit-arguments.ts); a
 * statement is its own transaction, so
 * a superseded driver's commit writes nothing. Through Kysely the same commit was a transaction
 * of a fenced SELECT, a statement per write and per transition, and the head: about a dozen
 * round trips, each with Kysely's own cost on top.
 *
 * Queries are named, so `pg` prepares each once per connection. Text goes through the store's
 * codec (text-codec.ts) exactly as through Kysely: the writes are sent as `JSON.stringify`
 * output encoded by `encodeJsonText`, text parameters by `encodeText`, and rows come back
 * through `decodeRow(s)`.
 */
export function postgresRunWriter(pool: Pool): RunWriter {
  const query = async <R extends QueryResultRow>(name: string, text: string, values: ReadonlyArray<unknown>): Promise<R[]> =>
    (await pool.query<R>({ name, text, values: values as unknown[] })).rows

  /** `query` of a fenced call: the functions' lost-lease error becomes `LeaseLostError`. */
  const fenced = async <R extends QueryResultRow>(runId: string, name: string, text: string, values: ReadonlyArray<unknown>): Promise<R[]> => {
    try {
      return await query<R>(name, text, values)
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code === LEASE_LOST) throw new LeaseLostError({ runId })
      throw error
    }
  }

  const acquireLease = async (input: LeaseRequest): Promise<LeaseAcquisition | undefined> => {
    // The same decision as `acquireLease` (leases.repository.ts): a read, the decision in JS, a
    // compare-and-set on the token read.
    const [run] = await query<{ lease_owner: string | null; lease_expires_at: number | null; lease_token: number }>(
      'agentvisor_lease_read',
      'SELECT lease_owner, lease_expires_at, lease_token FROM runs WHERE id = $1',
      [encodeText(input.runId)]
    )
    if (run === undefined) return undefined
    decodeRow(run)
    const held = run.lease_owner !== null && run.lease_expires_at !== null && run.lease_expires_at > input.now
    if (held && run.lease_owner !== input.owner && !input.isAbandoned(run.lease_owner!)) {
      return { holder: { owner: run.lease_owner!, expiresAt: run.lease_expires_at! } }
    }
    const token = run.lease_token + 1
    const result = await pool.query({
      name: 'agentvisor_lease_take',
      text: 'UPDATE runs SET lease_owner = $1, lease_expires_at = $2, lease_token = $3 WHERE id = $4 AND lease_token = $5',
      values: [encodeText(input.owner), input.now + input.ttlMs, token, encodeText(input.runId), run.lease_token]
    })
    // Someone acquired it between our read and our write: they hold it now.
    if (result.rowCount === 0) return acquireLease(input)
    return { token }
  }

  return {
    commit: async (commit) => {
      if (commit.headDeferred === true) await fenced(commit.runId, 'agentvisor_commit_deferred', COMMIT_STEP_DEFERRED, commitArguments(commit))
      else await fenced(commit.runId, 'agentvisor_commit_step', COMMIT_STEP, commitArguments(commit))
    },
    // The run's row at most 50 ms behind its journal while the run steps faster than
    // that (docs/durability.md, "The run's row"): never its status, which a commit writes.
    refreshHead: async (runId, leaseToken, head) => {
      const result = await pool.query({
        name: 'agentvisor_refresh_head',
        text: 'UPDATE runs SET state = $1, steps = $2, updated_at = $3, error_json = $4, ended_at = $5 WHERE id = $6 AND lease_token = $7',
        values: [encodeText(head.state), head.steps, encodeText(head.updated_at), head.error_json, textOrNull(head.ended_at), encodeText(runId), leaseToken]
      })
      if (result.rowCount === 0) throw new LeaseLostError({ runId })
    },
    createRun: async (row, lease) => {
      const insertRun: RunWrite = { op: 'insertRun', row: leasedRun(row, lease) }
      await query('agentvisor_create_run', 'SELECT agentvisor_apply_writes($1::jsonb)', [writesJson([insertRun])])
      return FIRST_LEASE_TOKEN
    },
    write: async (runId, leaseToken, writes) => {
      await fenced(runId, 'agentvisor_write', 'SELECT agentvisor_write($1, $2, $3::jsonb)', [encodeText(runId), leaseToken, writesJson(writes)])
    },
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
    acquireLease,
    attemptTotals: async (runId) =>
      totalsOf(
        decodeRows(
          await query<TotalsRow>('agentvisor_attempt_totals', `${RUN_ATTEMPT_TOTALS_SELECT} FROM attempts WHERE run_id = $1 ${RUN_ATTEMPT_TOTALS_GROUP}`, [
            encodeText(runId)
          ])
        )
      ),
    attemptRecorded: async (runId, step, attempt) =>
      (
        await query('agentvisor_attempt_recorded', 'SELECT 1 FROM attempts WHERE run_id = $1 AND step = $2 AND attempt = $3', [
          encodeText(runId),
          step,
          attempt
        ])
      ).length > 0,
    releaseLease: async (runId, leaseToken, usageJson) => {
      await query(
        'agentvisor_lease_release',
        'UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL, usage_json = coalesce($3, usage_json) WHERE id = $1 AND lease_token = $2',
        [encodeText(runId), leaseToken, usageJson ?? null]
      )
    },
    settlePending: async (runId, leaseToken, outcome, at) => {
      const [row] = await fenced<{ n: number }>(runId, 'agentvisor_settle_pending', 'SELECT agentvisor_settle_pending($1, $2, $3, $4) AS n', [
        encodeText(runId),
        leaseToken,
        outcome,
        encodeText(at)
      ])
      return row?.n ?? 0
    },
    close: async () => undefined
  }
}
