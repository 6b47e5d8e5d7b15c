// The commit thread's own script (commit-thread.ts): one connection to the store's file, the run
// writer's very statements (sqlite-commits.ts), one transaction per batch it is handed, and the
// messages of commit-protocol.ts both ways.
import { parentPort, workerData } from 'node:worker_threads'
import BetterSqlite3 from 'better-sqlite3'
import { LeaseLostError } from '../errors.js'
import type { CommitThreadData, FromCommitThread, ToCommitThread, WireError, WireOutcome } from './commit-protocol.js'
import { useWriterPragmas } from './connection-pragmas.js'
import type { Wire } from './commit-wire.js'
import type { CommitOutcome } from './batch-commit.js'
import { sqliteCommits } from './sqlite-commits.js'

const data = workerData as CommitThreadData
const port = parentPort!

/** An error as the main thread rebuilds it: its message, and SQLite's code when it has one. */
const wireError = (error: unknown): WireError => {
  const code = (error as { code?: unknown } | null)?.code
  return { message: error instanceof Error ? error.message : String(error), ...(typeof code === 'string' ? { code } : {}) }
}

const wireOutcome = (outcome: CommitOutcome): WireOutcome => {
  if (outcome === undefined) return null
  return outcome.error instanceof LeaseLostError ? { lost: outcome.error.runId } : wireError(outcome.error)
}

let commitWire: ((batch: Wire) => CommitOutcome[]) | undefined
let opening: WireError | undefined
let sqlite: BetterSqlite3.Database | undefined
try {
  // The store's connection settings; the file is in WAL mode already, and its checkpoints are
  // the checkpointer's (checkpointer.ts).
  sqlite = new BetterSqlite3(data.file, { timeout: data.busyTimeoutMs })
  useWriterPragmas(sqlite, data.busyTimeoutMs)
  sqlite.pragma('wal_autocheckpoint = 0')
  commitWire = sqliteCommits(sqlite).commitWire
} catch (error) {
  opening = wireError(error)
}

const reply = (message: FromCommitThread): void => port.postMessage(message)

/** The answer to a batch: its outcomes, or why nothing of it holds. */
const committed = (id: number, wire: Wire): FromCommitThread => {
  if (commitWire === undefined) return { _tag: 'Failed', id, error: opening ?? { message: 'the commit thread has no connection' } }
  try {
    return { _tag: 'Committed', id, outcomes: commitWire(wire).map(wireOutcome) }
  } catch (error) {
    return { _tag: 'Failed', id, error: wireError(error) }
  }
}

port.on('message', (message: ToCommitThread) => {
  switch (message._tag) {
    case 'Commit':
      reply(committed(message.id, message.wire))
      return
    // Stopped: the connection is closed here, by its own thread, and the thread ends with nothing
    // left open (commit-thread.ts `stop`).
    case 'Close':
      sqlite?.close()
      reply({ _tag: 'Closed', id: message.id })
      port.close()
      return
  }
})
