import { Kysely, PostgresDialect } from 'kysely'
import type { Database } from '../database.js'
import { withTextCodec } from '../text-codec-dialect.js'
import type { RememberedRuleRow } from '../tables/remembered-rules.table.js'
import type { Pool, QueryResultRow } from 'pg'
import { LeaseLostError } from '../errors.js'
import { FIRST_LEASE_TOKEN, kyselyRawWriter, type LoadedRun, leasedRun, type RawRunWriter } from '../run-writer/run-writer.js'
import type { LeaseAcquisition, LeaseRequest } from '../repositories/leases.repository.js'
import { type JournalHead, journalEntry } from '../repositories/journal-entries.repository.js'
import { decodeApprovalRow } from '../tables/approvals.columns.js'
import type { StoredApprovalRow } from '../tables/approvals.table.js'
import { decodeRunWithContract } from '../tables/runs.columns.js'
import type { StoredRunRow } from '../tables/runs.table.js'
import { decodeStepRow } from '../tables/steps.columns.js'
import type { StoredStepRow } from '../tables/steps.table.js'
import { decodeToolEffectRow } from '../tables/tool-effects.columns.js'
import type { StoredToolEffectRow } from '../tables/tool-effects.table.js'
import { decodeRow, decodeRows, decodeText, encodeText } from '../text-codec.js'
import { commitStatement, createRunStatement, type Statement, settlePendingStatement, stepCommitCall, writesStatement } from './postgres-statement.js'
import { textOrNull } from '../run-writer/bound-values.js'
import { RUN_ATTEMPT_TOTALS_GROUP, RUN_ATTEMPT_TOTALS_SELECT, type TotalsRow, totalsOf } from '../repositories/run-usage.repository.js'

/** Statements the writer names (prepares per connection) at most; any other shape goes unnamed. The shapes a run's writes take are far fewer. */
const MAX_PREPARED = 200

/**
 * The PostgreSQL `RawRunWriter`: every call one statement on the store's `pg` pool, one round trip.
 * A step's commit is one call of `agentvisor_commit` with the rows it writes as records (migration
 * 2026-12-05T000000-postgres-plain-tables); any other commit or write list one statement of plain
 * SQL (postgres-statement.ts): the fence (the head's UPDATE under the lease token, or for a commit
 * that leaves the row for later a locked read of it), one data-modifying CTE per write, the journal
 * entry. A superseded driver's call writes nothing and answers that it was fenced out. Writes whose order matters to each other (a receipt settled by the
 * commit that writes it) cannot share one statement: they go in order in one Kysely transaction,
 * through the repositories (`kyselyRawWriter`).
 *
 * Queries are named, so `pg` prepares each once per connection. Text goes through the store's
 * codec (text-codec.ts) exactly as through Kysely: text parameters by `encodeText`, rows back
 * through `decodeRow(s)`.
 */
export function postgresRawWriter(pool: Pool): RawRunWriter {
  const query = async <R extends QueryResultRow>(name: string | undefined, text: string, values: ReadonlyArray<unknown>): Promise<R[]> =>
    (await pool.query<R>(name === undefined ? { text, values: values as unknown[] } : { name, text, values: values as unknown[] })).rows
  // The writes that must go in order, on the same pool; never destroyed here (that would end the store's pool).
  const inOrder = kyselyRawWriter(new Kysely<Database>({ dialect: withTextCodec(new PostgresDialect({ pool })) }))

  /** A statement's name by its text: each shape of commit prepared once per connection (a bounded number of them). */
  const names = new Map<string, string>()
  const nameOf = (text: string): string | undefined => {
    let name = names.get(text)
    if (name === undefined && names.size < MAX_PREPARED) {
      name = `agentvisor_statement_${names.size + 1}`
      names.set(text, name)
    }
    return name
  }
  /** Runs a fenced statement: its `fenced` 0 is a lost lease. */
  const fenced = async (runId: string, statement: Statement): Promise<void> => {
    const [row] = await query<{ fenced: number }>(nameOf(statement.text), statement.text, statement.values)
    if (row?.fenced !== 1) throw new LeaseLostError({ runId })
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
      const entry = commit.transitions.length === 0 ? undefined : journalEntry(commit.runId, commit.transitions, commit.snapshot)
      const head = commit.headDeferred === true ? undefined : commit.head
      const step = stepCommitCall(commit.runId, commit.leaseToken, head, commit.writes, entry)
      if (step !== undefined) {
        const [row] = await query<{ fenced: boolean }>('agentvisor_commit', step.text, step.values)
        if (row?.fenced !== true) throw new LeaseLostError({ runId: commit.runId })
        return
      }
      const statement = commitStatement(commit.runId, commit.leaseToken, head, commit.writes, entry)
      if (statement === undefined) await inOrder.commit(commit)
      else await fenced(commit.runId, statement)
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
      const statement = createRunStatement({ op: 'insertRun', row: leasedRun(row, lease) })
      await query(nameOf(statement.text), statement.text, statement.values)
      return FIRST_LEASE_TOKEN
    },
    write: async (runId, leaseToken, writes) => {
      const statement = writesStatement(runId, leaseToken, writes)
      if (statement === undefined) await inOrder.write(runId, leaseToken, writes)
      else await fenced(runId, statement)
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
      const statement = settlePendingStatement(runId, leaseToken, outcome, at)
      const [row] = await query<{ fenced: number; settled: number }>('agentvisor_settle_pending', statement.text, statement.values)
      if (row?.fenced !== 1) throw new LeaseLostError({ runId })
      return row.settled
    },
    close: async () => undefined
  }
}
