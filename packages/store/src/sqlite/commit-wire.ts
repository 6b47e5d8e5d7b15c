import { compactWrites } from '../run-writer/compact-writes.js'
import { type BoundValue, pushAttemptValues, pushSettlementValues, pushStepValues, textOrNull } from '../run-writer/bound-values.js'
import type { GroupWrite, RunWrite, TransitionCommit } from '../run-writer/run-write.js'
import type { AttemptSettlement, NewAttempt } from '../tables/attempts.table.js'
import { encodeText } from '../text-codec.js'

/**
 * The writes of SQLite commits as the statements bind them: one flat array of the values each
 * statement takes, in its order, text already encoded (text-codec.ts), behind a tag naming the
 * statement. `sqliteCommits` runs a wire (sqlite-commits.ts), on the main thread or on the commit
 * thread, which is handed the same array (docs/durability.md, "Group commit").
 *
 * Why a flat array: a group commit crosses to the commit thread by structured clone, which writes
 * every property name of every object and makes every object anew on the other side. Measured
 * (2026-12-03, a batch of 64 step commits of the bench's tool loop, `v8.serialize` and
 * `v8.deserialize`, which `postMessage` uses): as objects, 10 µs a commit to write and 25 µs to
 * read back, most of the commit thread's CPU but its statements; as this array, 5 µs to encode
 * and write, 5 µs to read.
 *
 * A write the hot path never makes (an approval, policy events, a run's creation) travels as its
 * object behind the tag `OTHER`.
 */
export type Wire = Array<BoundValue | OtherWrite>

/** The writes that travel as their objects (`Op.other`). */
export type OtherWrite = Extract<RunWrite, { readonly op: 'insertApproval' | 'insertPolicyEvents' | 'insertRun' }>

/** What starts each entry of a wire: a commit of transitions, or a write of its own. */
export const Entry = {
  /** A run's creation: then the `insertRun` write (`OTHER`). */
  creation: 0,
  /** A commit of transitions (see `pushCommit` for its layout). */
  commit: 1
} as const

/** The statement of each write, and how many values follow its tag. */
export const Op = {
  /** A receipt with nothing known yet but who, why and when: run_id, step, attempt, provider, reason, started_at. */
  pendingAttempt: 1,
  /** Any other receipt: run_id, then `pushAttemptValues` (13). */
  attempt: 2,
  /** An answer's settlement (no error columns): outcome, settled_at, latency, ttft, tokens in, out, then run_id, step, attempt. */
  answered: 3,
  /** Any other settlement: `pushSettlementValues` (10), then run_id, step, attempt. */
  settlement: 4,
  /** A step: run_id, then `pushStepValues` (10). */
  step: 5,
  /** A step's results: results_json, run_id, step. */
  results: 6,
  /** A step's feedback: feedback, run_id, step. */
  feedback: 7,
  /** A tool effect started: run_id, step, position, tool_call_id, name, arguments, started_at. */
  startEffect: 8,
  /** A tool effect completed: result_json, completed_at, run_id, step, position. */
  completeEffect: 9,
  /** Any other write: its object. */
  other: 10
} as const

/** The values after each op's tag. */
export const OP_VALUES: Readonly<Record<(typeof Op)[keyof typeof Op], number>> = {
  [Op.pendingAttempt]: 6,
  [Op.attempt]: 14,
  [Op.answered]: 9,
  [Op.settlement]: 13,
  [Op.step]: 11,
  [Op.results]: 3,
  [Op.feedback]: 3,
  [Op.startEffect]: 7,
  [Op.completeEffect]: 5,
  [Op.other]: 1
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

/** Appends one write: its tag, then its values. */
export const pushWrite = (wire: Wire, write: RunWrite): void => {
  switch (write.op) {
    case 'insertAttempt': {
      const { row } = write
      if (isPendingOnly(row)) {
        wire.push(Op.pendingAttempt, encodeText(row.run_id), row.step, row.attempt, encodeText(row.provider), row.reason, encodeText(row.started_at))
      } else {
        wire.push(Op.attempt, encodeText(row.run_id))
        pushAttemptValues(wire as BoundValue[], row)
      }
      return
    }
    case 'settleAttempt': {
      const { patch } = write
      if (isAnswerOnly(patch)) {
        wire.push(
          Op.answered,
          patch.outcome,
          encodeText(patch.settled_at),
          patch.latency_ms ?? null,
          patch.ttft_ms ?? null,
          patch.tokens_in ?? null,
          patch.tokens_out ?? null
        )
      } else {
        wire.push(Op.settlement)
        pushSettlementValues(wire as BoundValue[], patch)
      }
      wire.push(encodeText(write.runId), write.step, write.attempt)
      return
    }
    case 'insertStep':
      wire.push(Op.step, encodeText(write.row.run_id))
      pushStepValues(wire as BoundValue[], write.row)
      return
    case 'setStepResults':
      wire.push(Op.results, write.resultsJson, encodeText(write.runId), write.step)
      return
    case 'setStepFeedback':
      wire.push(Op.feedback, encodeText(write.feedback), encodeText(write.runId), write.step)
      return
    case 'startToolEffect': {
      const { row } = write
      wire.push(
        Op.startEffect,
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
      wire.push(Op.completeEffect, write.resultJson, encodeText(write.at), encodeText(write.runId), write.step, write.position)
      return
    case 'insertApproval':
    case 'insertPolicyEvents':
    case 'insertRun':
      wire.push(Op.other, write)
      return
  }
}

/** Appends writes (fewer, the same rows: compact-writes.ts); returns how many it appended. */
export const pushWrites = (wire: Wire, writes: ReadonlyArray<RunWrite>): number => {
  const compacted = compactWrites(writes)
  for (const write of compacted) pushWrite(wire, write)
  return compacted.length
}

/**
 * Where each value of a commit entry's header sits, from the entry's tag: the one layout
 * `pushCommit` writes and sqlite-commits.ts `commitAt` reads. `end` is the offset after the
 * entry (a failed commit is skipped to there); `status` is null when it is unchanged; `deferred`
 * is 1 for a commit that leaves the run's row for later (`TransitionCommit.headDeferred`).
 */
export const CommitHeader = {
  tag: 0,
  end: 1,
  runId: 2,
  leaseToken: 3,
  deferred: 4,
  status: 5,
  state: 6,
  steps: 7,
  updatedAt: 8,
  errorJson: 9,
  endedAt: 10,
  transitions: 11
} as const

/** The values of a commit entry's header (`CommitHeader`). */
export const COMMIT_HEADER_SIZE = 12

/**
 * Where each value of a commit's journal entry sits, from the end of its header: there only when
 * the commit has transitions (`CommitHeader.transitions` > 0).
 */
export const JournalValues = {
  firstSeq: 0,
  seq: 1,
  transitionsJson: 2,
  snapshotJson: 3
} as const

/** The values of a commit's journal entry (`JournalValues`). */
export const JOURNAL_VALUES_SIZE = 4

/** A run's creation in a wire: `Entry.creation, Op.other, the insertRun write`. */
export const CREATION_SIZE = 3

/**
 * Appends a commit of transitions: its header (`CommitHeader`), its journal entry when it has
 * transitions (`JournalValues`), then how many writes follow, then the writes.
 */
export const pushCommit = (wire: Wire, commit: TransitionCommit): void => {
  const { head, transitions } = commit
  const at = wire.length
  for (let i = 0; i < COMMIT_HEADER_SIZE; i++) wire.push(null)
  wire[at + CommitHeader.tag] = Entry.commit
  wire[at + CommitHeader.runId] = encodeText(commit.runId)
  wire[at + CommitHeader.leaseToken] = commit.leaseToken
  wire[at + CommitHeader.deferred] = commit.headDeferred === true ? 1 : 0
  wire[at + CommitHeader.status] = head.status ?? null
  wire[at + CommitHeader.state] = encodeText(head.state)
  wire[at + CommitHeader.steps] = head.steps
  wire[at + CommitHeader.updatedAt] = encodeText(head.updated_at)
  wire[at + CommitHeader.errorJson] = head.error_json
  wire[at + CommitHeader.endedAt] = textOrNull(head.ended_at)
  wire[at + CommitHeader.transitions] = transitions.length
  // The commit's transitions are one journal entry: one row, one snapshot (docs/durability.md).
  if (transitions.length > 0) {
    const journal = wire.length
    for (let i = 0; i < JOURNAL_VALUES_SIZE; i++) wire.push(null)
    wire[journal + JournalValues.firstSeq] = transitions[0]!.seq
    wire[journal + JournalValues.seq] = transitions[transitions.length - 1]!.seq
    wire[journal + JournalValues.transitionsJson] = JSON.stringify(transitions)
    wire[journal + JournalValues.snapshotJson] = commit.snapshot
  }
  const count = wire.length
  wire.push(0)
  wire[count] = pushWrites(wire, commit.writes)
  wire[at + CommitHeader.end] = wire.length
}

/** A group commit's wire: its creations and commits in order, each one entry. */
export const encodeGroup = (batch: ReadonlyArray<GroupWrite>): Wire => {
  const wire: Wire = []
  for (const write of batch) {
    if ('created' in write) wire.push(Entry.creation, Op.other, write.created)
    else pushCommit(wire, write)
  }
  return wire
}
