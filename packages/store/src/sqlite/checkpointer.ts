import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

/** How often the checkpointer copies the write-ahead log back into the database file. */
const DEFAULT_EVERY_MS = 500

// The worker is a script of its own (not a file next to this one) so that it runs the same from
// `src` under the tests and from `dist`; it loads better-sqlite3 from where this package does.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
const db = new Database(workerData.file, { timeout: 5000 })
const checkpoint = () => { try { db.pragma('wal_checkpoint(PASSIVE)') } catch {} }
const timer = setInterval(checkpoint, workerData.everyMs)
parentPort.on('message', () => { clearInterval(timer); checkpoint(); db.close(); parentPort.close() })
`

/** A background checkpointer of one SQLite file; `stop` ends it (after a last checkpoint). */
export interface Checkpointer {
  readonly stop: () => Promise<void>
}

/**
 * Checkpoints the WAL of `file` from a worker thread with its own connection, so that the
 * writers' commits never pay for it. SQLite's automatic checkpoint runs inside whichever commit
 * crosses 1,000 WAL pages, copying them into the database file and syncing it: a stall of
 * milliseconds in the middle of a run's hot path every hundred steps or so. A PASSIVE
 * checkpoint never blocks a writer or a reader. The caller turns the automatic one off
 * (`wal_autocheckpoint = 0`) on its own connection while this runs.
 */
export function startCheckpointer(file: string, everyMs = DEFAULT_EVERY_MS): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3')
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file, everyMs, driver } })
  // A checkpointer never keeps a process alive; SQLite checkpoints on the last close anyway.
  worker.unref()
  worker.on('error', () => undefined)
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
  return {
    stop: () => {
      // Held until it has exited: a stop that is awaited must keep the process alive meanwhile.
      worker.ref()
      worker.postMessage('stop')
      return exited
    }
  }
}
