import { compactWrites } from '../run-writer/compact-writes.js'
import type { RunWrite, TransitionCommit } from '../run-writer/run-write.js'
import { journalEntry } from '../repositories/journal-entries.repository.js'
import { type BoundValue, pushAttemptValues, pushSettlementValues, pushStepValues } from '../run-writer/bound-values.js'
import { encodeJsonText, encodeText } from '../text-codec.js'

/** `$1, ..., $48`: the parameters of both commit functions. */
const COMMIT_PARAMETERS = Array.from({ length: 48 }, (_, i) => `$${i + 1}`).join(', ')

/**
 * A commit: `agentvisor_commit` of the 2026-12-01T170000 migration, its 48 arguments in its order
 * (the head, the settled receipt, the step, the next receipt, the other writes, the entry).
 */
export const COMMIT_STEP = `SELECT agentvisor_commit(${COMMIT_PARAMETERS})`

/**
 * A commit that leaves the run's row for a later refresh (`TransitionCommit.headDeferred`):
 * `agentvisor_commit_deferred` of the 2026-12-02T010000 migration, the same arguments, the fence
 * a locked read of the row instead of the head's UPDATE.
 */
export const COMMIT_STEP_DEFERRED = `SELECT agentvisor_commit_deferred(${COMMIT_PARAMETERS})`

/** Writes as the 2026-12-01T130000 functions take them: one `jsonb` array, text escaped (text-codec.ts). */
export const writesJson = (writes: ReadonlyArray<RunWrite>): string => encodeJsonText(JSON.stringify(compactWrites(writes)))

type Value = BoundValue
type Write<O extends RunWrite['op']> = Extract<RunWrite, { op: O }>

/**
 * The arguments of `COMMIT_STEP` for `commit`. The writes every step makes (the receipt it
 * settles, the step row, the next receipt) go as columns when they come first in the commit and
 * in that order, for the commit's own run; everything from the first write that does not goes in
 * the `jsonb` array, which the function applies after them: so the order of every write is the
 * commit's (the migration says why the columns). Text is encoded as the SQLite writer encodes it;
 * `*_json` columns hold `JSON.stringify` output, which the encoding never changes.
 */
export const commitArguments = (commit: TransitionCommit): Value[] => {
  const { head, runId } = commit
  const writes = compactWrites(commit.writes)
  let at = 0
  const settle = take(writes, at, 'settleAttempt', (w) => w.runId === runId)
  if (settle !== undefined) at++
  const step = take(writes, at, 'insertStep', (w) => w.row.run_id === runId)
  if (step !== undefined) at++
  const next = take(writes, at, 'insertAttempt', (w) => w.row.run_id === runId)
  if (next !== undefined) at++
  const entry = journalEntry(runId, commit.transitions, commit.snapshot)
  const values: Value[] = [
    encodeText(runId),
    commit.leaseToken,
    // The head (docs/durability.md, "How a run is stored"): a status left out did not change.
    head.status === undefined ? null : encodeText(head.status),
    encodeText(head.state),
    head.steps,
    encodeText(head.updated_at),
    head.error_json === null ? null : encodeText(head.error_json),
    head.ended_at === null ? null : encodeText(head.ended_at)
  ]
  if (settle === undefined) pushNulls(values, 12)
  else {
    values.push(settle.step, settle.attempt)
    pushSettlementValues(values, settle.patch)
  }
  if (step === undefined) pushNulls(values, 10)
  else {
    pushStepValues(values, step.row)
  }
  if (next === undefined) pushNulls(values, 13)
  else {
    pushAttemptValues(values, next.row)
  }
  values.push(
    at === writes.length ? null : encodeJsonText(JSON.stringify(writes.slice(at))),
    entry.seq,
    entry.first_seq,
    encodeText(entry.transitions_json),
    encodeText(entry.snapshot_json)
  )
  return values
}

const take = <O extends 'settleAttempt' | 'insertStep' | 'insertAttempt'>(
  writes: ReadonlyArray<RunWrite>,
  at: number,
  op: O,
  own: (write: Write<O>) => boolean
): Write<O> | undefined => {
  const write = writes[at]
  return write !== undefined && write.op === op && own(write as Write<O>) ? (write as Write<O>) : undefined
}

const pushNulls = (values: Value[], n: number): void => {
  for (let i = 0; i < n; i++) values.push(null)
}
