import type BetterSqlite3 from 'better-sqlite3'
import { LeaseLostError } from '../errors.js'
import { compactWrites } from '../run-writer/compact-writes.js'
import type { GroupWrite, RunWrite, TransitionCommit } from '../run-writer/run-write.js'
import type { AttemptSettlement, NewAttempt } from '../tables/attempts.table.js'
import { encodeParams, encodeText } from '../text-codec.js'
import { type BoundValue, pushAttemptValues, pushSettlementValues, pushStepValues, textOrNull } from '../run-writer/bound-values.js'

type Params = ReadonlyArray<string | number | bigint | null>

/** What became of each commit of a batch: undefined when it holds, else the error that rolled it back. */
export type CommitOutcome = { readonly error: unknown } | undefined

/** The statements of a run's writes on one connection, and the transactions made of them (`sqliteCommits`). */
export type SqliteCommits = ReturnType<typeof sqliteCommits>

/**
 * Every write a run's driver makes on SQLite, as cached prepared statements on `sqlite`, and the
 * transactions made of them: one commit (`commitNow`), fenced writes outside a transition
 * (`writeNow`), and a group commit of many runs' commits (`commitAll`). The run writer uses them
 * on the store's connection (sqlite-run-writer.ts), the commit thread on a connection of its own
 * (commit-thread.ts): the same code, so a commit is the same rows wherever it runs.
 */
export function sqliteCommits(sqlite: BetterSqlite3.Database) {
  const statements = new Map<string, BetterSqlite3.Statement>()
  const statement = (sql: string): BetterSqlite3.Statement => {
    let prepared = statements.get(sql)
    if (prepared === undefined) {
      prepared = sqlite.prepare(sql)
      statements.set(sql, prepared)
    }
    return prepared
  }
  const run = (sql: string, params: Params): number => statement(sql).run(...params).changes

  /** `INSERT INTO table (the row's columns) VALUES (...)`, prepared once per table and column list. */
  const insert = (table: string, row: object, conflict = ''): void => {
    const columns = Object.keys(row)
    const sql = `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})${conflict}`
    run(sql, bindColumns(columns, row))
  }
  const update = (table: string, set: object, where: string, params: Params): number => {
    const columns = Object.keys(set)
    const sql = `UPDATE ${table} SET ${columns.map((c) => `${c} = ?`).join(', ')} WHERE ${where}`
    return run(sql, [...bindColumns(columns, set), ...encodeParams(params)])
  }

  // The writes of a step, each one fixed statement naming every column it may set: no SQL text
  // is built or looked up per write (docs/architecture.md, "The hot path"). Text is bound encoded
  // (text-codec.ts); `*_json` columns hold `JSON.stringify` output, which the encoding never changes.
  const insertAttempt = sqlite.prepare(
    "INSERT INTO run_log (kind, run_id, step, n, provider, reason, outcome, error_kind, http_status, error_message, latency_ms, ttft_ms, tokens_in, tokens_out, partial_text, started_at, settled_at) VALUES ('a', ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)"
  )
  // A pending receipt's settlement columns are NULL until it is settled, once (`outcome =
  // 'pending'`): a column the patch does not give is left as it is, which is NULL, as before.
  const settleAttempt = sqlite.prepare(
    "UPDATE run_log SET outcome = ?, settled_at = ?, error_kind = coalesce(?, error_kind), http_status = coalesce(?, http_status), error_message = coalesce(?, error_message), latency_ms = coalesce(?, latency_ms), ttft_ms = coalesce(?, ttft_ms), tokens_in = coalesce(?, tokens_in), tokens_out = coalesce(?, tokens_out), partial_text = coalesce(?, partial_text) WHERE run_id = ? AND step = ? AND kind = 'a' AND n = ? AND outcome = 'pending'"
  )
  // The two receipt writes of every step in their common shapes, with only the values they have:
  // a receipt about to be sent (nothing known yet but who, why and when), and an answer's
  // settlement (no error columns). better-sqlite3 converts every bound value, NULLs included.
  const insertPendingAttempt = sqlite.prepare(
    "INSERT INTO run_log (kind, run_id, step, n, provider, reason, outcome, started_at) VALUES ('a', ?, ?, ?, ?, ?, 'pending', ?)"
  )
  const settleAnswered = sqlite.prepare(
    "UPDATE run_log SET outcome = ?, settled_at = ?, latency_ms = coalesce(?, latency_ms), ttft_ms = coalesce(?, ttft_ms), tokens_in = coalesce(?, tokens_in), tokens_out = coalesce(?, tokens_out) WHERE run_id = ? AND step = ? AND kind = 'a' AND n = ? AND outcome = 'pending'"
  )
  const insertStep = sqlite.prepare(
    "INSERT INTO run_log (kind, n, run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at) VALUES ('s', 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
  )
  const setStepResults = sqlite.prepare("UPDATE run_log SET results_json = ? WHERE run_id = ? AND step = ? AND kind = 's' AND n = 0")
  const setStepFeedback = sqlite.prepare("UPDATE run_log SET feedback = ? WHERE run_id = ? AND step = ? AND kind = 's' AND n = 0")
  const startToolEffect = sqlite.prepare(
    "INSERT INTO run_log (kind, run_id, step, n, tool_call_id, name, arguments, status, result_json, started_at, completed_at) VALUES ('t', ?, ?, ?, ?, ?, ?, 'started', NULL, ?, NULL) ON CONFLICT (run_id, step, kind, n) DO UPDATE SET status = excluded.status, name = excluded.name, arguments = excluded.arguments, started_at = excluded.started_at, result_json = NULL, completed_at = NULL"
  )
  const completeToolEffect = sqlite.prepare(
    "UPDATE run_log SET status = 'completed', result_json = ?, completed_at = ? WHERE run_id = ? AND step = ? AND kind = 't' AND n = ?"
  )

  /** The values of the write being bound (bound-values.ts), one array for every write. */
  const bound: BoundValue[] = []
  const apply = (write: RunWrite): void => {
    switch (write.op) {
      case 'insertAttempt': {
        const { row } = write
        if (isPendingOnly(row)) {
          insertPendingAttempt.run(encodeText(row.run_id), row.step, row.attempt, encodeText(row.provider), row.reason, encodeText(row.started_at))
          return
        }
        bound.length = 0
        bound.push(encodeText(row.run_id))
        pushAttemptValues(bound, row)
        insertAttempt.run(bound)
        return
      }
      case 'settleAttempt': {
        const { patch } = write
        if (isAnswerOnly(patch)) {
          settleAnswered.run(
            patch.outcome,
            encodeText(patch.settled_at),
            patch.latency_ms ?? null,
            patch.ttft_ms ?? null,
            patch.tokens_in ?? null,
            patch.tokens_out ?? null,
            encodeText(write.runId),
            write.step,
            write.attempt
          )
          return
        }
        bound.length = 0
        pushSettlementValues(bound, patch)
        bound.push(encodeText(write.runId), write.step, write.attempt)
        settleAttempt.run(bound)
        return
      }
      case 'insertStep':
        bound.length = 0
        bound.push(encodeText(write.row.run_id))
        pushStepValues(bound, write.row)
        insertStep.run(bound)
        return
      case 'setStepResults':
        setStepResults.run(write.resultsJson, encodeText(write.runId), write.step)
        return
      case 'setStepFeedback':
        setStepFeedback.run(encodeText(write.feedback), encodeText(write.runId), write.step)
        return
      case 'insertApproval':
        insert('approvals', write.row, ' ON CONFLICT (run_id, step, tool_call_id) DO NOTHING')
        return
      case 'insertPolicyEvents':
        for (const row of write.rows) insert('policy_events', row)
        return
      case 'insertRun': {
        const { contract_json, ...row } = write.row
        insert('runs', row)
        insert('run_contracts', { run_id: row.id, contract_json })
        return
      }
      case 'startToolEffect': {
        const { row } = write
        startToolEffect.run(
          encodeText(row.run_id),
          row.step,
          row.position,
          encodeText(row.tool_call_id),
          encodeText(row.name),
          encodeText(row.arguments),
          encodeText(row.started_at)
        )
        return
      }
      case 'completeToolEffect':
        completeToolEffect.run(write.resultJson, encodeText(write.at), encodeText(write.runId), write.step, write.position)
        return
    }
  }

  // The run's head: the fence (`lease_token`) and the columns a transition changes, with its
  // status only when that changed (it is indexed).
  const updateHead = sqlite.prepare('UPDATE runs SET state = ?, steps = ?, updated_at = ?, error_json = ?, ended_at = ? WHERE id = ? AND lease_token = ?')
  const updateHeadAndStatus = sqlite.prepare(
    'UPDATE runs SET status = ?, state = ?, steps = ?, updated_at = ?, error_json = ?, ended_at = ? WHERE id = ? AND lease_token = ?'
  )
  const writeHead = (commit: Pick<TransitionCommit, 'runId' | 'leaseToken' | 'head'>): number => {
    const { head, runId, leaseToken } = commit
    const state = encodeText(head.state)
    const updatedAt = encodeText(head.updated_at)
    const endedAt = textOrNull(head.ended_at)
    const id = encodeText(runId)
    return (
      head.status === undefined
        ? updateHead.run(state, head.steps, updatedAt, head.error_json, endedAt, id, leaseToken)
        : updateHeadAndStatus.run(head.status, state, head.steps, updatedAt, head.error_json, endedAt, id, leaseToken)
    ).changes
  }

  // An entry sits at its run's `steps + 1` after the commit: after every earlier entry, beside the
  // rows of the step the run is at (docs/durability.md, "How a run is stored").
  const insertEntry = sqlite.prepare("INSERT INTO run_log (run_id, step, kind, n, first_seq, transitions_json, snapshot_json) VALUES (?, ?, 'j', ?, ?, ?, ?)")
  // The same entry inserted only while the run's token is the driver's: the fence of a commit that
  // leaves the head for later, in the statement it makes anyway.
  const insertEntryFenced = sqlite.prepare(
    "INSERT INTO run_log (run_id, step, kind, n, first_seq, transitions_json, snapshot_json) SELECT ?, ?, 'j', ?, ?, ?, ? WHERE (SELECT lease_token FROM runs WHERE id = ?) = ?"
  )
  const commitBody = (commit: GroupWrite): void => {
    // A run's creation: its row, nothing to fence yet.
    if ('created' in commit) {
      apply(commit.created)
      return
    }
    const { runId, leaseToken, transitions } = commit
    const deferred = commit.headDeferred === true
    // The fence comes first, so a superseded driver writes nothing at all: the head update (one
    // statement with it), or for a commit that leaves the head for later, its journal entry
    // inserted only under the driver's token (with no transition, a read of the token), all under
    // the same write lock.
    if (!deferred) {
      if (writeHead(commit) === 0) throw new LeaseLostError({ runId })
    } else if (transitions.length === 0) fence(runId, leaseToken)
    // The commit's transitions are one journal entry: one row, one snapshot (docs/durability.md).
    if (transitions.length > 0) {
      const id = encodeText(runId)
      const step = commit.head.steps + 1
      const seq = transitions[transitions.length - 1]!.seq
      const firstSeq = transitions[0]!.seq
      const json = JSON.stringify(transitions)
      if (!deferred) insertEntry.run(id, step, seq, firstSeq, json, commit.snapshot)
      else if (insertEntryFenced.run(id, step, seq, firstSeq, json, commit.snapshot, id, leaseToken).changes === 0) throw new LeaseLostError({ runId })
    }
    // A step inserted and given its results in one commit is one INSERT (compact-writes.ts).
    for (const write of compactWrites(commit.writes)) apply(write)
  }
  const commitOne = sqlite.transaction(commitBody)
  const commitNow = commitOne.immediate.bind(null)

  const selectToken = sqlite.prepare('SELECT lease_token FROM runs WHERE id = ?').pluck()
  const fence = (runId: string, leaseToken: number): void => {
    if (selectToken.get(encodeText(runId)) !== leaseToken) throw new LeaseLostError({ runId })
  }
  const writeNow = sqlite
    .transaction((runId: string, leaseToken: number, writes: ReadonlyArray<RunWrite>) => {
      fence(runId, leaseToken)
      for (const write of writes) apply(write)
    })
    .immediate.bind(null)

  // Each commit in a savepoint (`commitOne` nested in a transaction): whatever fails in it rolls back alone.
  const commitEach = sqlite
    .transaction((batch: ReadonlyArray<GroupWrite>): CommitOutcome[] =>
      batch.map((commit) => {
        try {
          commitOne(commit)
          return undefined
        } catch (error) {
          return { error }
        }
      })
    )
    .immediate.bind(null)
  // The common case, without the two savepoint statements a commit costs: a commit's fence is its
  // first statement (the head update, or for a commit that leaves the head for later its fenced
  // journal entry), so a commit fenced out has written nothing and needs no undo. Any other failure
  // may have left half a commit: the whole transaction is thrown away and done again commit by
  // commit in savepoints (`commitEach`).
  class NeedsSavepoints extends Error {}
  const commitFenced = sqlite
    .transaction((batch: ReadonlyArray<GroupWrite>): CommitOutcome[] =>
      batch.map((commit) => {
        try {
          commitBody(commit)
          return undefined
        } catch (error) {
          if (error instanceof LeaseLostError) return { error }
          throw new NeedsSavepoints()
        }
      })
    )
    .immediate.bind(null)
  const commitAll = (batch: ReadonlyArray<GroupWrite>): CommitOutcome[] => {
    try {
      return commitFenced(batch)
    } catch (error) {
      if (error instanceof NeedsSavepoints) return commitEach(batch)
      throw error
    }
  }

  return { statement, update, apply, writeHead, fence, commitNow, writeNow, commitAll }
}

/** A receipt with nothing known yet but who, why and when: what every dispatch writes before its call. */
const isPendingOnly = (row: NewAttempt): boolean =>
  row.error_kind == null &&
  row.http_status == null &&
  row.error_message == null &&
  row.latency_ms == null &&
  row.ttft_ms == null &&
  row.tokens_in == null &&
  row.tokens_out == null &&
  row.partial_text == null

/** A settlement with no error columns: what an answered call writes. */
const isAnswerOnly = (patch: AttemptSettlement): boolean =>
  patch.error_kind == null && patch.http_status == null && patch.error_message == null && patch.partial_text == null

/**
 * A row's values in `columns` order, bound as the store holds them (text encoded, see
 * text-codec.ts). `*_json` columns are left as they are: they hold `JSON.stringify` output, which
 * the encoding never changes, and a tool's long output would otherwise be scanned for nothing.
 */
const bindColumns = (columns: ReadonlyArray<string>, row: object): Array<string | number | bigint | null> =>
  columns.map((column) => {
    const value = (row as Record<string, unknown>)[column]
    return typeof value === 'string' && !column.endsWith('_json') ? encodeText(value) : bindable(value)
  })

/** better-sqlite3 binds no `undefined` or booleans: the rows' optional columns become NULL. */
const bindable = (value: unknown): string | number | bigint | null => {
  if (value === undefined || value === null) return null
  if (typeof value === 'boolean') return value ? 1 : 0
  return value as string | number | bigint
}
