import type { GroupWrite } from '../run-writer/run-write.js'
import type { CommitOutcome } from './batch-commit.js'

/**
 * Where the batches of a group commit are committed (docs/durability.md, "Group commit"): on
 * this thread, or at a thread of their own. The SQLite run writer gives its connection's
 * statements and the store's commit thread (sqlite-run-writer.ts); the tests give a fake one.
 */
export interface BatchCommitter {
  /**
   * Commits a batch on this thread, in one transaction: an outcome per write, in order. Throws
   * when nothing of it holds.
   */
  readonly commitHere: (batch: ReadonlyArray<GroupWrite>) => ReadonlyArray<CommitOutcome>
  /** Starts the committer of another thread, or undefined when there is none. Asked once at most. */
  readonly startThread: () => ThreadCommitter | undefined
  /** Runs `f` on this thread's connection once nothing else holds it (an open Kysely transaction). */
  readonly whenConnectionFree: <A>(f: () => A) => A | Promise<A>
}

/** A committer on another thread (commit-thread.ts): batches committed one after another, in the order handed over. */
export interface ThreadCommitter {
  /** Commits a batch in one transaction there: an outcome per write, in order; rejects when nothing of it holds. */
  readonly commit: (batch: ReadonlyArray<GroupWrite>) => Promise<ReadonlyArray<CommitOutcome>>
  /** Batches handed over and not yet settled. */
  readonly inFlight: () => number
  /** Whether it still takes batches (once it has died, batches are committed here again). */
  readonly alive: () => boolean
  /** Settles what is in flight, then ends. */
  readonly stop: () => Promise<void>
}

/** When a group commit goes to the other thread. */
export interface GroupCommitLimits {
  /** A group commit of this many transitions' commits or more goes to the other thread (the first one starts it). */
  readonly threadMinBatch: number
  /** Once it runs, the queue is handed over as soon as it holds this many writes, without waiting for the end of the turn. */
  readonly threadChunk: number
}

/** The group commit of a run writer: its queue, and the writes of its own that wait for the other thread. */
export interface GroupCommits {
  /** Queues a commit or a creation for the next group commit: settles once its batch has committed, or rejects with what rolled it back. */
  readonly enqueue: (write: GroupWrite) => Promise<void>
  /**
   * Runs `f` (a write of its own on this thread's connection) now, or once the other thread is
   * done with what it has and the connection is free; group commits queued meanwhile wait behind it.
   */
  readonly whenFree: <A>(f: () => A) => A | Promise<A>
  /** Settles what the other thread has, then stops it. */
  readonly close: () => Promise<void>
}

interface Queued {
  readonly write: GroupWrite
  readonly resolve: () => void
  readonly reject: (error: unknown) => void
}

/**
 * Group commit: the writes many runs make in one turn of the event loop share one transaction,
 * one log write; one fenced-out run, or one whose write fails, rolls back alone
 * (docs/durability.md, "Group commit"). The queue is committed at the end of the turn
 * (`setImmediate`), here or, once a batch is large enough, at the other thread, which is started
 * by the first such batch counting transitions' commits only (runs' creations alone do not pay
 * for a thread). While the other thread has batches, a write of this thread's own waits until it
 * is done (the other holds the file's write lock meanwhile, and a write here would wait for it
 * synchronously), and new commits queue behind them, so writes take effect in the order made.
 */
export function groupCommits(committer: BatchCommitter, limits: GroupCommitLimits): GroupCommits {
  let thread: ThreadCommitter | undefined
  let threadTried = false
  let queue: Queued[] = []
  /** Transitions' commits in `queue` (the rest are runs' creations). */
  let queuedCommits = 0
  /** Writes of this thread's own waiting for the other thread to be done, in order. */
  const waiting: Array<() => void> = []

  const threadFor = (): ThreadCommitter | undefined => {
    if (thread !== undefined && !thread.alive()) thread = undefined
    if (thread === undefined && !threadTried && queuedCommits >= limits.threadMinBatch) {
      threadTried = true
      thread = committer.startThread()
    }
    return thread
  }
  const threadBusy = (): boolean => thread !== undefined && thread.inFlight() > 0

  const settle = (batch: ReadonlyArray<Queued>, outcomes: ReadonlyArray<CommitOutcome>): void => {
    for (let i = 0; i < batch.length; i++) {
      const outcome = outcomes[i]
      if (outcome === undefined) batch[i]!.resolve()
      else batch[i]!.reject(outcome.error)
    }
  }
  const rejectAll = (batch: ReadonlyArray<Queued>, error: unknown): void => {
    for (const queued of batch) queued.reject(error)
  }
  /** Takes what is queued, leaving the queue empty. */
  const takeQueue = (): Queued[] => {
    const batch = queue
    queue = []
    queuedCommits = 0
    return batch
  }
  const writesOf = (batch: ReadonlyArray<Queued>): GroupWrite[] => batch.map((queued) => queued.write)

  /** Hands the queue to the other thread (`thread`, running); once it is done, what waited for it runs. */
  const toThread = (to: ThreadCommitter): void => {
    const batch = takeQueue()
    to.commit(writesOf(batch))
      .then(
        (outcomes) => settle(batch, outcomes),
        (error: unknown) => rejectAll(batch, error)
      )
      .finally(afterThread)
  }
  const afterThread = (): void => {
    if (threadBusy()) return
    for (const run of waiting.splice(0)) run()
    if (queue.length > 0) flushSoon()
  }
  const flushSoon = (): void => {
    if (queue.length === 0 || waiting.length > 0) return
    // Behind commits already at the thread: there too, in order.
    const to = threadBusy() ? thread : queue.length >= limits.threadMinBatch ? threadFor() : undefined
    if (to !== undefined) toThread(to)
    else void whenFreeAsync(flushHere)
  }
  const flushHere = (): void => {
    const batch = takeQueue()
    let outcomes: ReadonlyArray<CommitOutcome>
    try {
      outcomes = committer.commitHere(writesOf(batch))
    } catch (error) {
      rejectAll(batch, error)
      return
    }
    settle(batch, outcomes)
  }

  const whenFree = <A>(f: () => A): A | Promise<A> => {
    if (threadBusy() || waiting.length > 0) {
      return new Promise<A>((resolve, reject) =>
        waiting.push(() => {
          try {
            const result = whenFree(f)
            if (result instanceof Promise) result.then(resolve, reject)
            else resolve(result)
          } catch (error) {
            reject(error)
          }
        })
      )
    }
    return committer.whenConnectionFree(f)
  }
  const whenFreeAsync = async (f: () => void): Promise<void> => {
    try {
      await whenFree(f)
    } catch {
      // flushHere settles every queued write itself.
    }
  }

  return {
    enqueue: (write) =>
      new Promise<void>((resolve, reject) => {
        queue.push({ write, resolve, reject })
        if (!('created' in write)) queuedCommits += 1
        const to = queue.length >= limits.threadChunk && waiting.length === 0 ? threadFor() : undefined
        if (to !== undefined) toThread(to)
        else if (queue.length === 1) setImmediate(flushSoon)
      }),
    whenFree,
    // What the other thread has settles first: its runs wait on it.
    close: async () => {
      await thread?.stop()
    }
  }
}
