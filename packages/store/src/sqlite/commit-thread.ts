import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { LeaseLostError } from '../errors.js'
import type { Wire } from './commit-wire.js'
import type { CommitOutcome } from './sqlite-commits.js'

/** An error as it crosses from the thread: its message, and SQLite's code when it has one. */
export interface WireError {
  readonly message: string
  readonly code?: string
}

/** What the thread answers for one commit of a batch (structured-clone safe). */
export type WireOutcome = null | { readonly lost: string } | WireError

/** What the thread answers for one batch. */
export type WireReply = { readonly outcomes: ReadonlyArray<WireOutcome> } | { readonly fatal: WireError }

/** The message that asks the commit thread to close its connection and end. */
export const CLOSE_COMMIT_THREAD = 'close'
/** How long a stopping commit thread may take to close before it is terminated. */
const STOP_GRACE_MS = 5_000

/** What the thread is started with. */
export interface CommitThreadData {
  readonly file: string
  readonly busyTimeoutMs: number
}

/**
 * A thread of the process that commits group commits on a connection of its own to the same
 * SQLite file (docs/durability.md, "Group commit"), so that the SQLite work of many runs' steps,
 * most of a step's CPU after the machine's, runs on another core while the main thread goes on
 * driving the runs whose commits are already durable. Batches are committed one after another,
 * in the order they were handed over; each settles once its transaction has committed.
 */
export interface CommitThread {
  /** Commits a group commit's wire (commit-wire.ts) in one transaction there (`sqliteCommits().commitWire`); its outcomes in order. */
  readonly commit: (batch: Wire) => Promise<ReadonlyArray<CommitOutcome>>
  /** Batches handed over and not yet settled. */
  readonly inFlight: () => number
  /** Whether it still takes batches (it stops for good when its thread dies). */
  readonly alive: () => boolean
  /** Settles what is in flight, then ends the thread. */
  readonly stop: () => Promise<void>
}

// The compiled worker, found from the sources (under the tests) as from `dist`: both are two
// folders below the package root.
const WORKER = fileURLToPath(new URL('../../dist/sqlite/commit-thread-worker.js', import.meta.url))

/** An error the thread reported, as the main thread's code reads errors (`code` kept, as SQLite's). */
const errorOf = (wire: WireError): Error => Object.assign(new Error(wire.message), wire.code === undefined ? {} : { code: wire.code })

const outcomeOf = (wire: WireOutcome): CommitOutcome =>
  wire === null ? undefined : 'lost' in wire ? { error: new LeaseLostError({ runId: wire.lost }) } : { error: errorOf(wire) }

/**
 * Starts the commit thread of `file`, or undefined where it cannot run (no compiled worker next
 * to this module: then group commits stay on the main thread, as they always can).
 */
export function startCommitThread(data: CommitThreadData): CommitThread | undefined {
  if (!existsSync(WORKER)) return undefined
  const worker = new Worker(WORKER, { workerData: data })
  // It never keeps a process alive by itself; what waits on it does.
  worker.unref()
  const pending: Array<{ readonly resolve: (outcomes: ReadonlyArray<CommitOutcome>) => void; readonly reject: (error: unknown) => void }> = []
  const drainWaiters: Array<() => void> = []
  const settleDrained = (): void => {
    for (const resolve of drainWaiters.splice(0)) resolve()
  }
  /** Settles once nothing is in flight (at once when nothing is). */
  const drained = (): Promise<void> => (pending.length === 0 ? Promise.resolve() : new Promise<void>((resolve) => drainWaiters.push(resolve)))
  let dead: Error | undefined
  const fail = (cause: Error): void => {
    if (dead !== undefined) return
    dead = cause
    for (const waiter of pending.splice(0)) waiter.reject(cause)
    settleDrained()
  }
  worker.on('message', (reply: WireReply) => {
    const waiter = pending.shift()
    if (waiter === undefined) return
    if ('fatal' in reply) waiter.reject(errorOf(reply.fatal))
    else waiter.resolve(reply.outcomes.map(outcomeOf))
    if (pending.length === 0) {
      worker.unref()
      settleDrained()
    }
  })
  worker.on('error', (error) => fail(new Error(`the store's commit thread failed: ${error.message}`)))
  worker.on('exit', (code) => fail(new Error(`the store's commit thread exited (code ${code})`)))
  return {
    commit: (batch) =>
      new Promise((resolve, reject) => {
        if (dead !== undefined) return reject(dead)
        pending.push({ resolve, reject })
        // Held while a batch is in flight: its runs wait on it.
        worker.ref()
        worker.postMessage(batch)
      }),
    inFlight: () => pending.length,
    alive: () => dead === undefined,
    stop: async () => {
      await drained()
      if (dead !== undefined) return
      dead = new Error("the store's commit thread was stopped")
      // Asked to close its connection and end: a `terminate` would leave the connection to be
      // finalised after it returned, and its last writes to the file's -wal and -shm with it.
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
      worker.ref()
      worker.postMessage(CLOSE_COMMIT_THREAD)
      const stuck = setTimeout(() => void worker.terminate(), STOP_GRACE_MS)
      await exited
      clearTimeout(stuck)
    }
  }
}
