import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import * as Data from 'effect/Data'
import { LeaseLostError } from '../errors.js'
import type { CommitThreadData, FromCommitThread, ToCommitThread, WireError, WireOutcome } from './commit-protocol.js'
import type { Wire } from './commit-wire.js'
import type { CommitOutcome } from './batch-commit.js'

/** How long a stopping commit thread may take to close before it is terminated. */
const STOP_GRACE_MS = 5_000

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

/** The commit thread's script cannot be found: the package is not built (or not whole). */
export class CommitThreadMissing extends Data.TaggedError('CommitThreadMissing')<{ readonly file: string }> {
  override get message(): string {
    return `the store's commit thread cannot start: ${this.file} is missing (build the package: npx tsc -b)`
  }
}

/** What a worker is started from: the compiled script, or a module that loads the TypeScript one. */
export interface WorkerScript {
  readonly url: URL
}

/**
 * The commit thread's script, next to this module: the compiled one when this runs from `dist`,
 * the TypeScript source when it runs from `src` (the tests, which import the packages' sources),
 * loaded through tsx's loader registered in the thread itself, so that a test exercises the
 * thread of the very sources it tests. Throws CommitThreadMissing when the script or the loader
 * is not there: a store whose thread cannot start fails, rather than making its group commits
 * somewhere the tests never see.
 */
export const commitThreadScript = (): WorkerScript => {
  const fromSources = import.meta.url.endsWith('.ts')
  const script = new URL(fromSources ? './commit-thread-worker.ts' : './commit-thread-worker.js', import.meta.url)
  if (!existsSync(script)) throw new CommitThreadMissing({ file: fileURLToPath(script) })
  if (!fromSources) return { url: script }
  // tsx's ESM API (its `import` export, which `require.resolve` does not give).
  let api: string
  try {
    api = createRequire(import.meta.url)
      .resolve('tsx/package.json')
      .replace(/package\.json$/, 'dist/esm/api/index.mjs')
  } catch {
    throw new CommitThreadMissing({ file: 'tsx (the devDependency that loads the commit thread from its TypeScript source)' })
  }
  if (!existsSync(api)) throw new CommitThreadMissing({ file: api })
  const bootstrap = `import { register } from ${JSON.stringify(pathToFileURL(api).href)}\nregister()\nawait import(${JSON.stringify(script.href)})\n`
  return { url: new URL(`data:text/javascript,${encodeURIComponent(bootstrap)}`) }
}

/** An error the thread reported, as the main thread's code reads errors (`code` kept, as SQLite's). */
const errorOf = (wire: WireError): Error => Object.assign(new Error(wire.message), wire.code === undefined ? {} : { code: wire.code })

const outcomeOf = (wire: WireOutcome): CommitOutcome =>
  wire === null ? undefined : 'lost' in wire ? { error: new LeaseLostError({ runId: wire.lost }) } : { error: errorOf(wire) }

/** Starts the commit thread of `file` from `script` (`commitThreadScript`). */
export function startCommitThread(script: WorkerScript, data: CommitThreadData): CommitThread {
  const worker = new Worker(script.url, { workerData: data })
  // It never keeps a process alive by itself; what waits on it does.
  worker.unref()
  /** The batches handed over and not yet answered, by their request's id. */
  const pending = new Map<number, { readonly resolve: (outcomes: ReadonlyArray<CommitOutcome>) => void; readonly reject: (error: unknown) => void }>()
  let nextId = 0
  const send = (message: ToCommitThread): void => worker.postMessage(message)
  const drainWaiters: Array<() => void> = []
  const settleDrained = (): void => {
    for (const resolve of drainWaiters.splice(0)) resolve()
  }
  /** Settles once nothing is in flight (at once when nothing is). */
  const drained = (): Promise<void> => (pending.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => drainWaiters.push(resolve)))
  let dead: Error | undefined
  const fail = (cause: Error): void => {
    if (dead !== undefined) return
    dead = cause
    const waiters = [...pending.values()]
    pending.clear()
    for (const waiter of waiters) waiter.reject(cause)
    settleDrained()
  }
  worker.on('message', (reply: FromCommitThread) => {
    if (reply._tag === 'Closed') return
    const waiter = pending.get(reply.id)
    // A reply to nothing asked: the two threads no longer agree on what is in flight, so no
    // reply can be trusted to belong to its batch any more.
    if (waiter === undefined) {
      fail(new Error(`the store's commit thread answered request ${reply.id}, which is not in flight`))
      void worker.terminate()
      return
    }
    pending.delete(reply.id)
    if (reply._tag === 'Failed') waiter.reject(errorOf(reply.error))
    else waiter.resolve(reply.outcomes.map(outcomeOf))
    if (pending.size === 0) {
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
        const id = nextId++
        pending.set(id, { resolve, reject })
        // Held while a batch is in flight: its runs wait on it.
        worker.ref()
        send({ _tag: 'Commit', id, wire: batch })
      }),
    inFlight: () => pending.size,
    alive: () => dead === undefined,
    stop: async () => {
      await drained()
      if (dead !== undefined) return
      dead = new Error("the store's commit thread was stopped")
      // Asked to close its connection and end: a `terminate` would leave the connection to be
      // finalised after it returned, and its last writes to the file's -wal and -shm with it.
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
      worker.ref()
      send({ _tag: 'Close', id: nextId++ })
      const stuck = setTimeout(() => void worker.terminate(), STOP_GRACE_MS)
      await exited
      clearTimeout(stuck)
    }
  }
}
