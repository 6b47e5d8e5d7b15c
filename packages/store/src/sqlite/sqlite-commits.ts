import type BetterSqlite3 from 'better-sqlite3'
import type { GroupWrite, RunWrite, TransitionCommit } from '../run-writer/run-write.js'
import { encodeText } from '../text-codec.js'
import { batchCommit, type CommitOutcome } from './batch-commit.js'
import { encodeGroup, pushCommit, pushWrites, type Wire } from './commit-wire.js'
import { type PreparedStatements, preparedStatements } from './prepared-statements.js'
import { type RunHead, runHead } from './run-head.js'
import { type StepWrites, stepWrites } from './step-writes.js'
import { wireEntries } from './wire-entry.js'

/** The statements of a run's writes on one connection, and the transactions made of them (`sqliteCommits`). */
export interface SqliteCommits {
  /** A statement prepared once on the connection and cached by its SQL. */
  readonly statement: PreparedStatements['statement']
  /** `UPDATE table SET (set's columns) WHERE where`, `params` bound after them; the rows it changed. */
  readonly update: PreparedStatements['update']
  /** A write the hot path never makes (an approval, policy events, a run's creation), outside any transaction of its own. */
  readonly apply: StepWrites['applyOther']
  /** The run's head, fenced by its token, outside any transaction of its own; the rows it changed (0: the lease is lost). */
  readonly writeHead: RunHead['writeHead']
  /** Throws LeaseLostError unless `id` (as stored: encoded) is leased under `leaseToken`. */
  readonly fence: RunHead['fence']
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
 * Every write a run's driver makes on SQLite, as prepared statements on `sqlite` (a step's writes:
 * step-writes.ts; the run's head and its fence: run-head.ts; the rest cached by their SQL:
 * prepared-statements.ts), and the transactions made of them: one commit (`commitNow`), fenced
 * writes outside a transition (`writeNow`), and a group commit of many runs' commits
 * (`commitAll`, batch-commit.ts), each commit its fence, its journal entry and its writes in that
 * order (wire-entry.ts). The run writer uses them on the store's connection
 * (sqlite-run-writer.ts), the commit thread on a connection of its own (commit-thread.ts): the
 * same code, so a commit is the same rows wherever it runs.
 */
export function sqliteCommits(sqlite: BetterSqlite3.Database): SqliteCommits {
  const prepared = preparedStatements(sqlite)
  const writes = stepWrites(sqlite, prepared)
  const head = runHead(sqlite)
  const entries = wireEntries(sqlite, writes, head)

  const commitNow = sqlite
    .transaction((commit: TransitionCommit): void => {
      const wire: Wire = []
      pushCommit(wire, commit)
      entries.commitAt(wire, 0)
    })
    .immediate.bind(null)
  const writeNow = sqlite
    .transaction((runId: string, leaseToken: number, written: ReadonlyArray<RunWrite>) => {
      head.fence(encodeText(runId), leaseToken)
      const wire: Wire = []
      writes.applyWrites(wire, 0, pushWrites(wire, written))
    })
    .immediate.bind(null)
  const commitWire = batchCommit(sqlite, entries)
  const commitAll = (batch: ReadonlyArray<GroupWrite>): CommitOutcome[] => commitWire(encodeGroup(batch))

  return {
    statement: prepared.statement,
    update: prepared.update,
    apply: writes.applyOther,
    writeHead: head.writeHead,
    fence: head.fence,
    commitNow,
    writeNow,
    commitAll,
    commitWire
  }
}
