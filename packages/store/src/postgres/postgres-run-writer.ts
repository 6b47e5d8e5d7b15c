import { Kysely, PostgresDialect } from 'kysely'
import { namedQueries } from './named-queries.js'
import { postgresRunReads } from './postgres-run-reads.js'
import { postgresLeases } from './postgres-leases.js'
import type { Database } from '../database.js'
import { withTextCodec } from '../text-codec-dialect.js'
import type { Pool } from 'pg'
import { LeaseLostError } from '../errors.js'
import { FIRST_LEASE_TOKEN, kyselyRawWriter, leasedRun, type RawRunWriter } from '../run-writer/run-writer.js'
import { journalEntry } from '../repositories/journal-entries.repository.js'
import { encodeText } from '../text-codec.js'
import { commitStatement, createRunStatement, settlePendingStatement, stepCommitCall, writesStatement } from './postgres-statement.js'
import { textOrNull } from '../run-writer/bound-values.js'

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
 * Its queries are named (named-queries.ts), its reads and its lease apart (postgres-run-reads.ts,
 * postgres-leases.ts). Text goes through the store's
 * codec (text-codec.ts) exactly as through Kysely: text parameters by `encodeText`, rows back
 * through `decodeRow(s)`.
 */
export function postgresRawWriter(pool: Pool): RawRunWriter {
  const queries = namedQueries(pool)
  const { query, change, nameOf, fenced } = queries
  // The writes that must go in order, on the same pool; never destroyed here (that would end the store's pool).
  const inOrder = kyselyRawWriter(new Kysely<Database>({ dialect: withTextCodec(new PostgresDialect({ pool })) }))

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
      const refreshed = await change(
        'agentvisor_refresh_head',
        'UPDATE runs SET state = $1, steps = $2, updated_at = $3, error_json = $4, ended_at = $5 WHERE id = $6 AND lease_token = $7',
        [encodeText(head.state), head.steps, encodeText(head.updated_at), head.error_json, textOrNull(head.ended_at), encodeText(runId), leaseToken]
      )
      if (refreshed === 0) throw new LeaseLostError({ runId })
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
    ...postgresRunReads(queries),
    ...postgresLeases(queries),
    settlePending: async (runId, leaseToken, outcome, at) => {
      const statement = settlePendingStatement(runId, leaseToken, outcome, at)
      const [row] = await query<{ fenced: number; settled: number }>('agentvisor_settle_pending', statement.text, statement.values)
      if (row?.fenced !== 1) throw new LeaseLostError({ runId })
      return row.settled
    },
    close: async () => undefined
  }
}
