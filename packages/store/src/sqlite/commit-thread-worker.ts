// The commit thread's own script (commit-thread.ts): one connection to the store's file, the run
// writer's very statements (sqlite-commits.ts), one transaction per batch it is handed.
import { parentPort, workerData } from 'node:worker_threads'
import BetterSqlite3 from 'better-sqlite3'
import { LeaseLostError } from '../errors.js'
import { CLOSE_COMMIT_THREAD, type CommitThreadData, type WireError, type WireOutcome, type WireReply } from './commit-thread.js'
import { useWriterPragmas } from './connection-pragmas.js'
import type { Wire } from './commit-wire.js'
import { type CommitOutcome, sqliteCommits } from './sqlite-commits.js'

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

port.on('message', (batch: Wire | typeof CLOSE_COMMIT_THREAD) => {
  // Stopped: the connection is closed here, by its own thread, and the thread ends with nothing
  // left open (commit-thread.ts `stop`).
  if (batch === CLOSE_COMMIT_THREAD) {
    sqlite?.close()
    port.close()
    return
  }
  let reply: WireReply
  if (commitWire === undefined) reply = { fatal: opening ?? { message: 'the commit thread has no connection' } }
  else {
    try {
      reply = { outcomes: commitWire(batch).map(wireOutcome) }
    } catch (error) {
      reply = { fatal: wireError(error) }
    }
  }
  port.postMessage(reply)
})
