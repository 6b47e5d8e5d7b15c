import type BetterSqlite3 from 'better-sqlite3'
import { LeaseLostError } from '../errors.js'
import type { Wire } from './commit-wire.js'
import type { WireEntries } from './wire-entry.js'

/** What became of each commit of a batch: undefined when it holds, else the error that rolled it back. */
export type CommitOutcome = { readonly error: unknown } | undefined

/**
 * A group commit's wire (commit-wire.ts `encodeGroup`) made in one transaction on `sqlite`, entry
 * by entry (`entries`): an outcome per entry, in order, a failed one rolled back alone.
 *
 * The common case goes without the two savepoint statements a commit costs: a commit's fence is
 * its first statement (wire-entry.ts), so a commit fenced out has written nothing and needs no
 * undo. Any other failure may have left half a commit: the whole transaction is thrown away and
 * done again entry by entry, each in a savepoint.
 */
export function batchCommit(sqlite: BetterSqlite3.Database, { commitAt, entryEnd }: WireEntries): (wire: Wire) => CommitOutcome[] {
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
  return (wire) => {
    try {
      return commitFenced(wire)
    } catch (error) {
      if (error instanceof NeedsSavepoints) return commitEach(wire)
      throw error
    }
  }
}
