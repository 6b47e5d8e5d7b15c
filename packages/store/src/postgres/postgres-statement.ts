import { compactWrites } from '../run-writer/compact-writes.js'
import type { RunHead, RunWrite } from '../run-writer/run-write.js'
import type { NewJournalEntry } from '../tables/journal-entries.table.js'
import { type BoundValue, textOrNull } from '../run-writer/bound-values.js'
import { encodeText } from '../text-codec.js'

/**
 * A run's writes as ONE PostgreSQL statement (docs/durability.md, "How a run is stored"): a `fence`
 * first, then one data-modifying CTE per write, each reading `fence`, so that a statement whose fence
 * finds no row writes nothing at all. It answers `fenced`: 1, or 0 for a superseded driver.
 *
 * - The fence of a commit is the run's head UPDATE under its lease token; of a commit that leaves the
 *   head for a later refresh, or of writes outside a commit, a read of the run's row under the lock
 *   that UPDATE would take (`for no key update`): a takeover waits for the statement, or the
 *   statement for the takeover, and then finds the new token.
 * - The CTEs of one statement see the database as it was before it and run in no set order
 *   (PostgreSQL's WITH), so a list in which a write touches a row an earlier one of the list made or
 *   changed (a receipt settled by the commit that writes it) is not made one statement:
 *   `writesStatement` answers undefined and the writer applies it in order in a transaction.
 *
 * Text is bound encoded as the SQLite writer binds it (text-codec.ts); `*_json` columns hold
 * `JSON.stringify` output, which the encoding never changes. Each parameter carries its column's type.
 */
export interface Statement {
  readonly text: string
  readonly values: BoundValue[]
}

/** The store's integer and bigint columns by name (every other column a write binds is text). */
const INTEGER = new Set(['step', 'attempt', 'http_status', 'tokens_in', 'tokens_out', 'position', 'remember', 'steps', 'forked_from_seq', 'seq', 'first_seq'])
const BIGINT = new Set(['latency_ms', 'ttft_ms', 'lease_expires_at', 'lease_token'])

const typeOf = (column: string): string => (INTEGER.has(column) ? 'integer' : BIGINT.has(column) ? 'bigint' : 'text')

/** The statement being built: its CTEs and its values, each `$n` typed. */
class Builder {
  readonly values: BoundValue[] = []
  readonly ctes: string[] = []
  param(value: BoundValue, column: string): string {
    this.values.push(value)
    return `$${this.values.length}::${typeOf(column)}`
  }
  /** A row's columns and their parameters, text encoded unless a `*_json` column. */
  row(row: object): { columns: string; params: string } {
    const columns: string[] = []
    const params: string[] = []
    for (const [column, value] of Object.entries(row)) {
      if (value === undefined) continue
      columns.push(column)
      params.push(this.param(bindable(column, value), column))
    }
    return { columns: columns.join(', '), params: params.join(', ') }
  }
  cte(sql: string): void {
    this.ctes.push(`w${this.ctes.length} as (${sql})`)
  }
  statement(fence: string): Statement {
    return { text: `with fence as (${fence})${this.ctes.map((cte) => `, ${cte}`).join('')} select count(*)::int as fenced from fence`, values: this.values }
  }
}

const bindable = (column: string, value: unknown): BoundValue => {
  if (value === null) return null
  if (typeof value === 'boolean') return value ? 1 : 0
  if (typeof value === 'string') return column.endsWith('_json') ? value : encodeText(value)
  return value as BoundValue
}

/** The key of the row a write touches, when it touches one row (a policy event touches none other writes do). */
const rowKey = (write: RunWrite): string | undefined => {
  switch (write.op) {
    case 'insertAttempt':
      return `a ${write.row.run_id} ${write.row.step} ${write.row.attempt}`
    case 'settleAttempt':
      return `a ${write.runId} ${write.step} ${write.attempt}`
    case 'insertStep':
      return `s ${write.row.run_id} ${write.row.step}`
    case 'setStepResults':
    case 'setStepFeedback':
      return `s ${write.runId} ${write.step}`
    case 'startToolEffect':
      return `t ${write.row.run_id} ${write.row.step} ${write.row.position}`
    case 'completeToolEffect':
      return `t ${write.runId} ${write.step} ${write.position}`
    case 'insertApproval':
      return `p ${write.row.run_id} ${write.row.step} ${write.row.tool_call_id}`
    case 'insertPolicyEvents':
      return undefined
    case 'insertRun':
      // The run's other rows may follow it: a list with a run's creation and anything else goes in order.
      return 'r'
  }
}

/** Whether no write of `writes` touches a row an earlier one touched: then their order does not matter. */
const independent = (writes: ReadonlyArray<RunWrite>): boolean => {
  if (writes.length < 2) return true
  const seen = new Set<string>()
  for (const write of writes) {
    const key = rowKey(write)
    if (key === undefined) continue
    if (key === 'r' || seen.has(key)) return false
    seen.add(key)
  }
  return true
}

/** Each write as a CTE of `b`, gated by `fence`. */
const addWrite = (b: Builder, write: RunWrite): void => {
  switch (write.op) {
    case 'insertAttempt': {
      const r = write.row
      b.cte(
        `insert into attempts (run_id, step, attempt, provider, reason, outcome, error_kind, http_status, error_message, latency_ms, ttft_ms, tokens_in, tokens_out, partial_text, started_at, settled_at)
         select ${b.param(encodeText(r.run_id), 'run_id')}, ${b.param(r.step, 'step')}, ${b.param(r.attempt, 'attempt')}, ${b.param(encodeText(r.provider), 'provider')},
           ${b.param(r.reason, 'reason')}, 'pending', ${b.param(r.error_kind ?? null, 'error_kind')}, ${b.param(r.http_status ?? null, 'http_status')},
           ${b.param(textOrNull(r.error_message), 'error_message')}, ${b.param(r.latency_ms ?? null, 'latency_ms')}, ${b.param(r.ttft_ms ?? null, 'ttft_ms')},
           ${b.param(r.tokens_in ?? null, 'tokens_in')}, ${b.param(r.tokens_out ?? null, 'tokens_out')}, ${b.param(textOrNull(r.partial_text), 'partial_text')},
           ${b.param(encodeText(r.started_at), 'started_at')}, null from fence`
      )
      return
    }
    case 'settleAttempt': {
      // A column the settlement does not give keeps its value; a settled receipt is never settled again.
      const p = write.patch
      const keep = (column: 'error_kind' | 'http_status' | 'error_message' | 'latency_ms' | 'ttft_ms' | 'tokens_in' | 'tokens_out' | 'partial_text') => {
        const value = p[column]
        return `${column} = coalesce(${b.param(typeof value === 'string' ? encodeText(value) : (value ?? null), column)}, a.${column})`
      }
      b.cte(
        `update attempts a set outcome = ${b.param(p.outcome, 'outcome')}, settled_at = ${b.param(encodeText(p.settled_at), 'settled_at')},
           ${keep('error_kind')}, ${keep('http_status')}, ${keep('error_message')}, ${keep('latency_ms')}, ${keep('ttft_ms')}, ${keep('tokens_in')},
           ${keep('tokens_out')}, ${keep('partial_text')}
         from fence where a.run_id = ${b.param(encodeText(write.runId), 'run_id')} and a.step = ${b.param(write.step, 'step')}
           and a.attempt = ${b.param(write.attempt, 'attempt')} and a.outcome = 'pending'`
      )
      return
    }
    case 'insertStep': {
      // The defaults the table has for a column the row leaves out.
      const r = write.row
      b.cte(
        `insert into steps (run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at)
         select ${b.param(encodeText(r.run_id), 'run_id')}, ${b.param(r.step, 'step')}, ${b.param(encodeText(r.provider), 'provider')},
           ${b.param(encodeText(r.prompt_summary ?? ''), 'prompt_summary')}, ${b.param(encodeText(r.text ?? ''), 'text')},
           ${b.param(r.tool_calls_json ?? '[]', 'tool_calls_json')}, ${b.param(r.results_json ?? null, 'results_json')}, ${b.param(textOrNull(r.feedback), 'feedback')},
           ${b.param(r.tokens_in ?? 0, 'tokens_in')}, ${b.param(r.tokens_out ?? 0, 'tokens_out')}, ${b.param(encodeText(r.at), 'at')} from fence`
      )
      return
    }
    case 'setStepResults':
    case 'setStepFeedback': {
      const set =
        write.op === 'setStepResults'
          ? `results_json = ${b.param(write.resultsJson, 'results_json')}`
          : `feedback = ${b.param(encodeText(write.feedback), 'feedback')}`
      b.cte(`update steps s set ${set} from fence where s.run_id = ${b.param(encodeText(write.runId), 'run_id')} and s.step = ${b.param(write.step, 'step')}`)
      return
    }
    case 'insertApproval': {
      const { columns, params } = b.row(write.row)
      b.cte(`insert into approvals (${columns}) select ${params} from fence on conflict (run_id, step, tool_call_id) do nothing`)
      return
    }
    case 'insertPolicyEvents': {
      if (write.rows.length === 0) return
      // One INSERT of the rows in their order: the audit's ids come from its identity in that order.
      const COLUMNS = ['run_id', 'step', 'kind', 'act', 'target', 'rule', 'layer', 'decision', 'source', 'request_id', 'performed_target', 'at'] as const
      const rows = write.rows.map(
        (row) => `(${COLUMNS.map((column) => b.param(bindable(column, (row as Record<string, unknown>)[column] ?? null), column)).join(', ')})`
      )
      b.cte(`insert into policy_events (${COLUMNS.join(', ')}) select * from (values ${rows.join(', ')}) v where exists (select 1 from fence)`)
      return
    }
    case 'insertRun': {
      const { contract_json, ...run } = write.row
      const { columns, params } = b.row(run)
      b.cte(`insert into runs (${columns}) select ${params} from fence`)
      b.cte(
        `insert into run_contracts (run_id, contract_json) select ${b.param(encodeText(run.id), 'run_id')}, ${b.param(contract_json, 'contract_json')} from fence`
      )
      return
    }
    case 'startToolEffect': {
      // A retried call keeps one row: started again.
      const r = write.row
      b.cte(
        `insert into tool_effects (run_id, step, position, tool_call_id, name, arguments, status, result_json, started_at, completed_at)
         select ${b.param(encodeText(r.run_id), 'run_id')}, ${b.param(r.step, 'step')}, ${b.param(r.position, 'position')}, ${b.param(encodeText(r.tool_call_id), 'tool_call_id')},
           ${b.param(encodeText(r.name), 'name')}, ${b.param(encodeText(r.arguments), 'arguments')}, 'started', null, ${b.param(encodeText(r.started_at), 'started_at')}, null
         from fence
         on conflict (run_id, step, position) do update
         set status = excluded.status, name = excluded.name, arguments = excluded.arguments, started_at = excluded.started_at, result_json = null, completed_at = null`
      )
      return
    }
    case 'completeToolEffect':
      b.cte(
        `update tool_effects t set status = 'completed', result_json = ${b.param(write.resultJson, 'result_json')}, completed_at = ${b.param(encodeText(write.at), 'completed_at')}
         from fence where t.run_id = ${b.param(encodeText(write.runId), 'run_id')} and t.step = ${b.param(write.step, 'step')} and t.position = ${b.param(write.position, 'position')}`
      )
      return
  }
}

/** The fence of writes outside a commit, and of a commit that leaves the run's head for later. */
const lockedRun = (b: Builder, runId: string, leaseToken: number): string =>
  `select id from runs where id = ${b.param(encodeText(runId), 'run_id')} and lease_token = ${b.param(leaseToken, 'lease_token')} for no key update`

/**
 * A commit (`TransitionCommit`) as one statement: the fence (the head's UPDATE, or with
 * `headDeferred` the locked read), every write, the journal entry. Undefined when its writes
 * depend on each other's order (see above).
 */
export const commitStatement = (
  runId: string,
  leaseToken: number,
  head: RunHead | undefined,
  writes: ReadonlyArray<RunWrite>,
  entry: NewJournalEntry | undefined
): Statement | undefined => {
  const compacted = compactWrites(writes)
  if (!independent(compacted)) return undefined
  const b = new Builder()
  let fence: string
  if (head === undefined) fence = lockedRun(b, runId, leaseToken)
  else {
    // A status left out did not change: the indexed column is left alone.
    const status = head.status === undefined ? '' : `status = ${b.param(head.status, 'status')}, `
    fence = `update runs set ${status}state = ${b.param(encodeText(head.state), 'state')}, steps = ${b.param(head.steps, 'steps')},
      updated_at = ${b.param(encodeText(head.updated_at), 'updated_at')}, error_json = ${b.param(head.error_json, 'error_json')},
      ended_at = ${b.param(textOrNull(head.ended_at), 'ended_at')}
      where id = ${b.param(encodeText(runId), 'run_id')} and lease_token = ${b.param(leaseToken, 'lease_token')} returning id`
  }
  for (const write of compacted) addWrite(b, write)
  if (entry !== undefined) {
    // The commit's journal entry: its transitions and the one snapshot (docs/durability.md, "The journal").
    b.cte(
      `insert into journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json)
       select id, ${b.param(entry.seq, 'seq')}, ${b.param(entry.first_seq, 'first_seq')}, ${b.param(encodeText(entry.transitions_json), 'transitions_json')},
         ${b.param(encodeText(entry.snapshot_json), 'snapshot_json')} from fence`
    )
  }
  return b.statement(fence)
}

/** Fenced writes outside a commit as one statement, or undefined as for `commitStatement`. */
export const writesStatement = (runId: string, leaseToken: number, writes: ReadonlyArray<RunWrite>): Statement | undefined =>
  commitStatement(runId, leaseToken, undefined, writes, undefined)

/** A new run, already leased, and its contract: one statement with nothing to fence (`fence` is one empty row). */
export const createRunStatement = (write: Extract<RunWrite, { op: 'insertRun' }>): Statement => {
  const b = new Builder()
  addWrite(b, write)
  return b.statement('select 1')
}

/** The run's pending receipts settled, fenced: `fenced` and `settled`, how many. */
export const settlePendingStatement = (runId: string, leaseToken: number, outcome: string, at: string): Statement => {
  const b = new Builder()
  const fence = lockedRun(b, runId, leaseToken)
  const text = `with fence as (${fence}),
    settled as (update attempts a set outcome = ${b.param(outcome, 'outcome')}, settled_at = ${b.param(encodeText(at), 'settled_at')}
                  from fence where a.run_id = fence.id and a.outcome = 'pending' returning 1)
    select (select count(*) from fence)::int as fenced, (select count(*) from settled)::int as settled`
  return { text, values: b.values }
}

/** One field of a composite literal: empty for null, else quoted with `"` and `\` escaped (PostgreSQL's record input). */
const field = (value: BoundValue | boolean): string => {
  if (value === null) return ''
  if (typeof value === 'number') return String(value)
  if (typeof value === 'boolean') return value ? 't' : 'f'
  return `"${value.replace(/["\\]/g, '\\$&')}"`
}
/** A row as a composite literal, its values in its table's column order. */
const record = (values: ReadonlyArray<BoundValue | boolean>): string => `(${values.map(field).join(',')})`

type Write<O extends RunWrite['op']> = Extract<RunWrite, { op: O }>

/** The write at `at` when it is an `op` of the commit's own run. */
const take = <O extends 'settleAttempt' | 'insertStep' | 'insertAttempt'>(
  writes: ReadonlyArray<RunWrite>,
  at: number,
  op: O,
  runId: string
): Write<O> | undefined => {
  const write = writes[at]
  if (write === undefined || write.op !== op) return undefined
  const own = write.op === 'settleAttempt' ? write.runId : (write as Write<'insertStep' | 'insertAttempt'>).row.run_id
  return own === runId ? (write as Write<O>) : undefined
}

/** `agentvisor_commit(fence, settled, step, next, entry)`: the migration 2026-12-05T000000-postgres-plain-tables. */
export const STEP_COMMIT = 'SELECT agentvisor_commit($1::agentvisor_fence, $2::attempts, $3::steps, $4::attempts, $5::journal_entries) AS fenced'

/**
 * A step's commit as one call of `agentvisor_commit`, the rows it writes as records: when its writes
 * are the ones every step makes, in their order, for its own run (the answering receipt settled,
 * the step, the next receipt; any of them absent). Undefined for any other commit, which
 * `commitStatement` writes. The function answers `fenced` true, or false for a superseded driver.
 */
export const stepCommitCall = (
  runId: string,
  leaseToken: number,
  head: RunHead | undefined,
  writes: ReadonlyArray<RunWrite>,
  entry: NewJournalEntry | undefined
): Statement | undefined => {
  const compacted = compactWrites(writes)
  let at = 0
  const settle = take(compacted, at, 'settleAttempt', runId)
  if (settle !== undefined) at++
  const step = take(compacted, at, 'insertStep', runId)
  if (step !== undefined) at++
  const next = take(compacted, at, 'insertAttempt', runId)
  if (next !== undefined) at++
  if (at !== compacted.length) return undefined
  const id = encodeText(runId)
  const fence = record([
    id,
    leaseToken,
    head === undefined,
    head?.status ?? null,
    head === undefined ? null : encodeText(head.state),
    head?.steps ?? null,
    head === undefined ? null : encodeText(head.updated_at),
    head?.error_json ?? null,
    textOrNull(head?.ended_at)
  ])
  // The settlement as a receipt's row: what it sets, null for what it leaves as it is.
  const p = settle?.patch
  const settled =
    settle === undefined || p === undefined
      ? null
      : record([
          id,
          settle.step,
          settle.attempt,
          null,
          null,
          p.outcome,
          p.error_kind ?? null,
          p.http_status ?? null,
          textOrNull(p.error_message),
          p.latency_ms ?? null,
          p.ttft_ms ?? null,
          p.tokens_in ?? null,
          p.tokens_out ?? null,
          textOrNull(p.partial_text),
          null,
          encodeText(p.settled_at)
        ])
  const s = step?.row
  const stepRow =
    s === undefined
      ? null
      : record([
          id,
          s.step,
          encodeText(s.provider),
          encodeText(s.prompt_summary ?? ''),
          encodeText(s.text ?? ''),
          s.tool_calls_json ?? '[]',
          s.results_json ?? null,
          textOrNull(s.feedback),
          s.tokens_in ?? 0,
          s.tokens_out ?? 0,
          encodeText(s.at)
        ])
  const n = next?.row
  const nextRow =
    n === undefined
      ? null
      : record([
          id,
          n.step,
          n.attempt,
          encodeText(n.provider),
          n.reason,
          'pending',
          n.error_kind ?? null,
          n.http_status ?? null,
          textOrNull(n.error_message),
          n.latency_ms ?? null,
          n.ttft_ms ?? null,
          n.tokens_in ?? null,
          n.tokens_out ?? null,
          textOrNull(n.partial_text),
          encodeText(n.started_at),
          null
        ])
  const entryRow = entry === undefined ? null : record([id, entry.seq, entry.first_seq, encodeText(entry.transitions_json), encodeText(entry.snapshot_json)])
  return { text: STEP_COMMIT, values: [fence, settled, stepRow, nextRow, entryRow] }
}
