import type BetterSqlite3 from 'better-sqlite3'
import { LeaseLostError } from '../errors.js'
import type { BoundValue } from '../run-writer/bound-values.js'
import { decodeText } from '../text-codec.js'
import { COMMIT_HEADER_SIZE, CommitHeader, CREATION_SIZE, Entry, JOURNAL_VALUES_SIZE, JournalValues, type Wire } from './commit-wire.js'
import type { RunHead } from './run-head.js'
import type { StepWrites } from './step-writes.js'

/** One entry of a commit's wire (commit-wire.ts): a run's creation, or a commit of a run. */
export interface WireEntries {
  /** Makes the entry at `at` (a creation, or a commit laid out as `CommitHeader` says); the offset after it. Throws LeaseLostError, having written nothing, when the run's lease is lost. */
  readonly commitAt: (wire: Wire, at: number) => number
  /** The offset after the entry at `at`, whether or not it was made. */
  readonly entryEnd: (wire: Wire, at: number) => number
}

/**
 * A wire entry's rows on `sqlite`, in their order: the fence first, so that a superseded driver
 * writes nothing at all (the head update under the run's token, one statement with it, or for a
 * commit that leaves the head for later its journal entry inserted only under the token: with no
 * transition, a read of the token), then the commit's journal entry, then its writes (`writes`).
 */
export function wireEntries(sqlite: BetterSqlite3.Database, writes: StepWrites, head: RunHead): WireEntries {
  // An entry sits at its run's `steps + 1` after the commit: after every earlier entry, beside the
  // rows of the step the run is at (docs/durability.md, "How a run is stored").
  const insertEntry = sqlite.prepare("INSERT INTO run_log (run_id, step, kind, n, first_seq, transitions_json, snapshot_json) VALUES (?, ?, 'j', ?, ?, ?, ?)")
  // The same entry inserted only while the run's token is the driver's: the fence of a commit that
  // leaves the head for later, in the statement it makes anyway.
  const insertEntryFenced = sqlite.prepare(
    "INSERT INTO run_log (run_id, step, kind, n, first_seq, transitions_json, snapshot_json) SELECT ?, ?, 'j', ?, ?, ?, ? WHERE (SELECT lease_token FROM runs WHERE id = ?) = ?"
  )
  const commitAt = (wire: Wire, at: number): number => {
    // A run's creation: its row, nothing to fence yet.
    if (wire[at] === Entry.creation) return writes.applyAt(wire, at + 1)
    const id = wire[at + CommitHeader.runId] as string
    const leaseToken = wire[at + CommitHeader.leaseToken] as number
    const deferred = wire[at + CommitHeader.deferred] === 1
    const steps = wire[at + CommitHeader.steps] as number
    const transitions = wire[at + CommitHeader.transitions] as number
    // The fence, all under the same write lock (see above).
    if (!deferred) {
      const changed = head.updateHeadRow(
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
    } else if (transitions === 0) head.fence(id, leaseToken)
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
    writes.applyWrites(wire, next + 1, wire[next] as number)
    return wire[at + CommitHeader.end] as number
  }
  const entryEnd = (wire: Wire, at: number): number => (wire[at] === Entry.creation ? at + CREATION_SIZE : (wire[at + CommitHeader.end] as number))
  return { commitAt, entryEnd }
}
