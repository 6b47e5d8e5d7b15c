import type BetterSqlite3 from 'better-sqlite3'
import type { BoundValue } from '../run-writer/bound-values.js'
import { Op, OP_VALUES, type OtherWrite, type Wire } from './commit-wire.js'
import type { PreparedStatements } from './prepared-statements.js'

/** A commit's writes other than its head and journal entry, run from its wire (commit-wire.ts). */
export interface StepWrites {
  /** Runs the write whose tag is at `at` in `wire`; the offset after it. */
  readonly applyAt: (wire: Wire, at: number) => number
  /** Runs the `count` writes of `wire` from `at`. */
  readonly applyWrites: (wire: Wire, at: number, count: number) => void
  /** A write the hot path never makes (an approval, policy events, a run's creation), from its object. */
  readonly applyOther: (write: OtherWrite) => void
}

/**
 * The writes of a step on `sqlite`, each one fixed statement prepared once, naming every column it
 * may set: no SQL text is built or looked up per write (docs/architecture.md, "The hot path"), and
 * the rows go into `run_log` directly (docs/durability.md, "How a run is stored"). Text is bound
 * encoded (text-codec.ts); `*_json` columns hold `JSON.stringify` output, which the encoding never
 * changes. The writes the hot path never makes go through `prepared`'s cached statements.
 */
export function stepWrites(sqlite: BetterSqlite3.Database, prepared: PreparedStatements): StepWrites {
  const {
    insertAttempt,
    settleAttempt,
    insertPendingAttempt,
    settleAnswered,
    insertStep,
    setStepResults,
    setStepFeedback,
    startToolEffect,
    completeToolEffect
  } = stepStatements(sqlite)

  /** The values of the write being bound, one array for every write that binds an array. */
  const bound: BoundValue[] = []
  /** `bound` filled with the `n` values of `wire` from `at`. */
  const boundFrom = (wire: Wire, at: number, n: number): BoundValue[] => {
    bound.length = 0
    for (let i = at; i < at + n; i++) bound.push(wire[i] as BoundValue)
    return bound
  }
  const applyOther = otherWrites(prepared)
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
  const applyWrites = (wire: Wire, at: number, count: number): void => {
    for (let i = 0, next = at; i < count; i++) next = applyAt(wire, next)
  }
  return { applyAt, applyWrites, applyOther }
}

/**
 * The fixed statements of a step's writes on `sqlite`, prepared once, each naming every column it
 * may set, into `run_log` directly (docs/durability.md, "How a run is stored").
 */
const stepStatements = (sqlite: BetterSqlite3.Database) => ({
  insertAttempt: sqlite.prepare(
    "INSERT INTO run_log (kind, run_id, step, n, provider, reason, outcome, error_kind, http_status, error_message, latency_ms, ttft_ms, tokens_in, tokens_out, partial_text, started_at, settled_at) VALUES ('a', ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)"
  ),
  // A pending receipt's settlement columns are NULL until it is settled, once (`outcome =
  // 'pending'`): a column the patch does not give is left as it is, which is NULL, as before.
  settleAttempt: sqlite.prepare(
    "UPDATE run_log SET outcome = ?, settled_at = ?, error_kind = coalesce(?, error_kind), http_status = coalesce(?, http_status), error_message = coalesce(?, error_message), latency_ms = coalesce(?, latency_ms), ttft_ms = coalesce(?, ttft_ms), tokens_in = coalesce(?, tokens_in), tokens_out = coalesce(?, tokens_out), partial_text = coalesce(?, partial_text) WHERE run_id = ? AND step = ? AND kind = 'a' AND n = ? AND outcome = 'pending'"
  ),
  // The two receipt writes of every step in their common shapes, with only the values they have:
  // a receipt about to be sent (nothing known yet but who, why and when), and an answer's
  // settlement (no error columns). better-sqlite3 converts every bound value, NULLs included.
  insertPendingAttempt: sqlite.prepare(
    "INSERT INTO run_log (kind, run_id, step, n, provider, reason, outcome, started_at) VALUES ('a', ?, ?, ?, ?, ?, 'pending', ?)"
  ),
  settleAnswered: sqlite.prepare(
    "UPDATE run_log SET outcome = ?, settled_at = ?, latency_ms = coalesce(?, latency_ms), ttft_ms = coalesce(?, ttft_ms), tokens_in = coalesce(?, tokens_in), tokens_out = coalesce(?, tokens_out) WHERE run_id = ? AND step = ? AND kind = 'a' AND n = ? AND outcome = 'pending'"
  ),
  insertStep: sqlite.prepare(
    "INSERT INTO run_log (kind, n, run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at) VALUES ('s', 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
  ),
  setStepResults: sqlite.prepare("UPDATE run_log SET results_json = ? WHERE run_id = ? AND step = ? AND kind = 's' AND n = 0"),
  setStepFeedback: sqlite.prepare("UPDATE run_log SET feedback = ? WHERE run_id = ? AND step = ? AND kind = 's' AND n = 0"),
  startToolEffect: sqlite.prepare(
    "INSERT INTO run_log (kind, run_id, step, n, tool_call_id, name, arguments, status, result_json, started_at, completed_at) VALUES ('t', ?, ?, ?, ?, ?, ?, 'started', NULL, ?, NULL) ON CONFLICT (run_id, step, kind, n) DO UPDATE SET status = excluded.status, name = excluded.name, arguments = excluded.arguments, started_at = excluded.started_at, result_json = NULL, completed_at = NULL"
  ),
  completeToolEffect: sqlite.prepare(
    "UPDATE run_log SET status = 'completed', result_json = ?, completed_at = ? WHERE run_id = ? AND step = ? AND kind = 't' AND n = ?"
  )
})

/** The writes the hot path never makes (an approval, policy events, a run's creation), each through `prepared`'s cached statements. */
const otherWrites =
  (prepared: PreparedStatements) =>
  (write: OtherWrite): void => {
    switch (write.op) {
      case 'insertApproval':
        prepared.insert('approvals', write.row, ' ON CONFLICT (run_id, step, tool_call_id) DO NOTHING')
        return
      case 'insertPolicyEvents':
        for (const row of write.rows) prepared.insert('policy_events', row)
        return
      case 'insertRun': {
        const { contract_json, ...row } = write.row
        prepared.insert('runs', row)
        prepared.insert('run_contracts', { run_id: row.id, contract_json })
        return
      }
    }
  }
