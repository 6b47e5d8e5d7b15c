import type BetterSqlite3 from 'better-sqlite3'
import { LeaseLostError } from '../errors.js'
import type { GroupWrite, RunWrite, TransitionCommit } from '../run-writer/run-write.js'
import { decodeText, encodeParams, encodeText } from '../text-codec.js'
import { type BoundValue, textOrNull } from '../run-writer/bound-values.js'
import {
  COMMIT_HEADER_SIZE,
  CommitHeader,
  CREATION_SIZE,
  Entry,
  encodeGroup,
  JOURNAL_VALUES_SIZE,
  JournalValues,
  Op,
  OP_VALUES,
  type OtherWrite,
  pushCommit,
  pushWrites,
  type Wire
} from './commit-wire.js'

type Params = ReadonlyArray<string | number | bigint | null>

/** What became of each commit of a batch: undefined when it holds, else the error that rolled it back. */
export type CommitOutcome = { readonly error: unknown } | undefined

/** The statements of a run's writes on one connection, and the transactions made of them (`sqliteCommits`). */
export interface SqliteCommits {
  /** A statement prepared once on the connection and cached by its SQL. */
  readonly statement: (sql: string) => BetterSqlite3.Statement
  /** `UPDATE table SET (set's columns) WHERE where`, `params` bound after them; the rows it changed. */
  readonly update: (table: string, set: object, where: string, params: Params) => number
  /** A write the hot path never makes (an approval, policy events, a run's creation), outside any transaction of its own. */
  readonly apply: (write: OtherWrite) => void
  /** The run's head, fenced by its token, outside any transaction of its own; the rows it changed (0: the lease is lost). */
  readonly writeHead: (commit: Pick<TransitionCommit, 'runId' | 'leaseToken' | 'head'>) => number
  /** Throws LeaseLostError unless `id` (as stored: encoded) is leased under `leaseToken`. */
  readonly fence: (id: string, leaseToken: number) => void
  /** One commit, alone in its transaction. */
  readonly commitNow: (commit: TransitionCommit) => void
  /** Fenced writes outside a transition, in one transaction. */
  readonly writeNow: (runId: string, leaseToken: number, writes: ReadonlyArray<RunWrite>) => void
  /** A group commit in one transaction: an outcome per creation or commit, in order. */
  readonly commitAll: (batch: ReadonlyArray<GroupWrite>) => CommitOutcome[]
  /** A group commit's wire (commit-wire.ts `encodeGroup`) in one transaction: an outcome per entry, in order. */
  readonly commitWire: (wire: Wire) => CommitOutcome[]
}

/**
 * Every write a run's driver makes on SQLite, as cached prepared statements on `sqlite`, and the
 * transactions made of them: one commit (`commitNow`), fenced writes outside a transition
 * (`writeNow`), and a group commit of many runs' commits (`commitAll`). The run writer uses them
 * on the store's connection (sqlite-run-writer.ts), the commit thread on a connection of its own
 * (commit-thread.ts): the same code, so a commit is the same rows wherever it runs.
 */
export function sqliteCommits(sqlite: BetterSqlite3.Database): SqliteCommits {
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

  /** The values of the write being bound, one array for every write that binds an array. */
  const bound: BoundValue[] = []
  /** `bound` filled with the `n` values of `wire` from `at`. */
  const boundFrom = (wire: Wire, at: number, n: number): BoundValue[] => {
    bound.length = 0
    for (let i = at; i < at + n; i++) bound.push(wire[i] as BoundValue)
    return bound
  }
  /** A write the hot path never makes, from its object. */
  const applyOther = (write: OtherWrite): void => {
    switch (write.op) {
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
    }
  }
  /** Runs the write whose tag is at `at` in `wire`; the offset after it. */
  const applyAt = (wire: Wire, at: number): number => {
    const op = wire[at] as number
    const v = at + 1
    switch (op) {
      case Op.pendingAttempt:
        insertPendingAttempt.run(wire[v], wire[v + 1], wire[v + 2], wire[v + 3], wire[v + 4], wire[v + 5])
        break
      case Op.attempt:
        insertAttempt.run(boundFrom(wire, v, 14))
        break
      case Op.answered:
        settleAnswered.run(boundFrom(wire, v, 9))
        break
      case Op.settlement:
        settleAttempt.run(boundFrom(wire, v, 13))
        break
      case Op.step:
        insertStep.run(boundFrom(wire, v, 11))
        break
      case Op.results:
        setStepResults.run(wire[v], wire[v + 1], wire[v + 2])
        break
      case Op.feedback:
        setStepFeedback.run(wire[v], wire[v + 1], wire[v + 2])
        break
      case Op.startEffect:
        startToolEffect.run(boundFrom(wire, v, 7))
        break
      case Op.completeEffect:
        completeToolEffect.run(wire[v], wire[v + 1], wire[v + 2], wire[v + 3], wire[v + 4])
        break
      case Op.other:
        applyOther(wire[v] as OtherWrite)
        break
      default:
        throw new Error(`a commit's wire has no write tagged ${String(op)} at ${at}`)
    }
    return v + OP_VALUES[op as keyof typeof OP_VALUES]
  }
  /** Runs the `count` writes of `wire` from `at`. */
  const applyWrites = (wire: Wire, at: number, count: number): void => {
    for (let i = 0, next = at; i < count; i++) next = applyAt(wire, next)
  }
  /** Runs one write given as its object (a run's creation outside a group commit). */
  const apply = applyOther

  // The run's head: the fence (`lease_token`) and the columns a transition changes, with its
  // status only when that changed (it is indexed).
  const updateHead = sqlite.prepare('UPDATE runs SET state = ?, steps = ?, updated_at = ?, error_json = ?, ended_at = ? WHERE id = ? AND lease_token = ?')
  const updateHeadAndStatus = sqlite.prepare(
    'UPDATE runs SET status = ?, state = ?, steps = ?, updated_at = ?, error_json = ?, ended_at = ? WHERE id = ? AND lease_token = ?'
  )
  /** The head's UPDATE from values as the store holds them (`status` null: left as it is); the rows it changed. */
  const updateHeadRow = (
    status: BoundValue,
    state: BoundValue,
    steps: BoundValue,
    updatedAt: BoundValue,
    errorJson: BoundValue,
    endedAt: BoundValue,
    id: string,
    leaseToken: number
  ): number =>
    (status === null
      ? updateHead.run(state, steps, updatedAt, errorJson, endedAt, id, leaseToken)
      : updateHeadAndStatus.run(status, state, steps, updatedAt, errorJson, endedAt, id, leaseToken)
    ).changes
  const writeHead = ({ head, runId, leaseToken }: Pick<TransitionCommit, 'runId' | 'leaseToken' | 'head'>): number =>
    updateHeadRow(
      head.status ?? null,
      encodeText(head.state),
      head.steps,
      encodeText(head.updated_at),
      head.error_json,
      textOrNull(head.ended_at),
      encodeText(runId),
      leaseToken
    )

  // An entry sits at its run's `steps + 1` after the commit: after every earlier entry, beside the
  // rows of the step the run is at (docs/durability.md, "How a run is stored").
  const insertEntry = sqlite.prepare("INSERT INTO run_log (run_id, step, kind, n, first_seq, transitions_json, snapshot_json) VALUES (?, ?, 'j', ?, ?, ?, ?)")
  // The same entry inserted only while the run's token is the driver's: the fence of a commit that
  // leaves the head for later, in the statement it makes anyway.
  const insertEntryFenced = sqlite.prepare(
    "INSERT INTO run_log (run_id, step, kind, n, first_seq, transitions_json, snapshot_json) SELECT ?, ?, 'j', ?, ?, ?, ? WHERE (SELECT lease_token FROM runs WHERE id = ?) = ?"
  )
  /** Makes the entry at `at` (a creation, or a commit laid out as commit-wire.ts `CommitHeader` says); the offset after it. */
  const commitAt = (wire: Wire, at: number): number => {
    // A run's creation: its row, nothing to fence yet.
    if (wire[at] === Entry.creation) return applyAt(wire, at + 1)
    const id = wire[at + CommitHeader.runId] as string
    const leaseToken = wire[at + CommitHeader.leaseToken] as number
    const deferred = wire[at + CommitHeader.deferred] === 1
    const steps = wire[at + CommitHeader.steps] as number
    const transitions = wire[at + CommitHeader.transitions] as number
    // The fence comes first, so a superseded driver writes nothing at all: the head update (one
    // statement with it), or for a commit that leaves the head for later, its journal entry
    // inserted only under the driver's token (with no transition, a read of the token), all under
    // the same write lock.
    if (!deferred) {
      const changed = updateHeadRow(
        wire[at + CommitHeader.status] as BoundValue,
        wire[at + CommitHeader.state] as BoundValue,
        steps,
        wire[at + CommitHeader.updatedAt] as BoundValue,
        wire[at + CommitHeader.errorJson] as BoundValue,
        wire[at + CommitHeader.endedAt] as BoundValue,
        id,
        leaseToken
      )
      if (changed === 0) throw new LeaseLostError({ runId: decodeText(id) })
    } else if (transitions === 0) fence(id, leaseToken)
    let next = at + COMMIT_HEADER_SIZE
    // The commit's transitions are one journal entry: one row, one snapshot (docs/durability.md).
    if (transitions > 0) {
      const firstSeq = wire[next + JournalValues.firstSeq]
      const seq = wire[next + JournalValues.seq]
      const json = wire[next + JournalValues.transitionsJson]
      const snapshot = wire[next + JournalValues.snapshotJson]
      if (!deferred) insertEntry.run(id, steps + 1, seq, firstSeq, json, snapshot)
      else if (insertEntryFenced.run(id, steps + 1, seq, firstSeq, json, snapshot, id, leaseToken).changes === 0) {
        throw new LeaseLostError({ runId: decodeText(id) })
      }
      next += JOURNAL_VALUES_SIZE
    }
    applyWrites(wire, next + 1, wire[next] as number)
    return wire[at + CommitHeader.end] as number
  }
  /** The offset after the entry at `at`, whether or not it was made. */
  const entryEnd = (wire: Wire, at: number): number => (wire[at] === Entry.creation ? at + CREATION_SIZE : (wire[at + CommitHeader.end] as number))

  /** One commit, alone in its transaction. */
  const commitNow = sqlite
    .transaction((commit: TransitionCommit): void => {
      const wire: Wire = []
      pushCommit(wire, commit)
      commitAt(wire, 0)
    })
    .immediate.bind(null)

  const selectToken = sqlite.prepare('SELECT lease_token FROM runs WHERE id = ?').pluck()
  /** Throws LeaseLostError unless `id` (as stored: encoded) is leased under `leaseToken`. */
  const fence = (id: string, leaseToken: number): void => {
    if (selectToken.get(id) !== leaseToken) throw new LeaseLostError({ runId: decodeText(id) })
  }
  const writeNow = sqlite
    .transaction((runId: string, leaseToken: number, writes: ReadonlyArray<RunWrite>) => {
      fence(encodeText(runId), leaseToken)
      const wire: Wire = []
      applyWrites(wire, 0, pushWrites(wire, writes))
    })
    .immediate.bind(null)

  // Each entry in a savepoint (`commitAt` in a nested transaction): whatever fails in it rolls back alone.
  const commitInSavepoint = sqlite.transaction(commitAt)
  const commitEach = sqlite
    .transaction((wire: Wire): CommitOutcome[] => {
      const outcomes: CommitOutcome[] = []
      for (let at = 0; at < wire.length; at = entryEnd(wire, at)) {
        try {
          commitInSavepoint(wire, at)
          outcomes.push(undefined)
        } catch (error) {
          outcomes.push({ error })
        }
      }
      return outcomes
    })
    .immediate.bind(null)
  // The common case, without the two savepoint statements a commit costs: a commit's fence is its
  // first statement (the head update, or for a commit that leaves the head for later its fenced
  // journal entry), so a commit fenced out has written nothing and needs no undo. Any other failure
  // may have left half a commit: the whole transaction is thrown away and done again commit by
  // commit in savepoints (`commitEach`).
  class NeedsSavepoints extends Error {}
  const commitFenced = sqlite
    .transaction((wire: Wire): CommitOutcome[] => {
      const outcomes: CommitOutcome[] = []
      for (let at = 0; at < wire.length; ) {
        try {
          at = commitAt(wire, at)
          outcomes.push(undefined)
        } catch (error) {
          if (!(error instanceof LeaseLostError)) throw new NeedsSavepoints()
          outcomes.push({ error })
          at = entryEnd(wire, at)
        }
      }
      return outcomes
    })
    .immediate.bind(null)
  /** A group commit's wire (commit-wire.ts `encodeGroup`) in one transaction: an outcome per entry, in order. */
  const commitWire = (wire: Wire): CommitOutcome[] => {
    try {
      return commitFenced(wire)
    } catch (error) {
      if (error instanceof NeedsSavepoints) return commitEach(wire)
      throw error
    }
  }
  /** A group commit in one transaction: an outcome per creation or commit, in order. */
  const commitAll = (batch: ReadonlyArray<GroupWrite>): CommitOutcome[] => commitWire(encodeGroup(batch))

  return { statement, update, apply, writeHead, fence, commitNow, writeNow, commitAll, commitWire }
}

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
