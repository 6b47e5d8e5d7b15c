import { describe, expect, it } from 'vitest'
import type { NewRun, TransitionCommit } from '@agentvisor/store'
import { type BatchCommitter, type GroupCommitLimits, groupCommits, type ThreadCommitter } from '../src/sqlite/group-commit.js'
import type { GroupWrite } from '../src/run-writer/run-write.js'
import type { CommitOutcome } from '../src/sqlite/batch-commit.js'

// The group commit's scheduling alone (group-commit.ts), over a fake committer: which writes go
// in which batch, where each batch is committed, in what order, and which writes each outcome
// reaches. The real committers are tested in run-writer.test.ts and commit-thread.test.ts.

const LIMITS: GroupCommitLimits = { threadMinBatch: 4, threadChunk: 8 }

/** A transition's commit of `runId`, known by its run alone. */
const commitOf = (runId: string): TransitionCommit => ({
  runId,
  leaseToken: 1,
  writes: [],
  transitions: [],
  snapshot: '{}',
  head: { state: 'acting', steps: 1, updated_at: 'x', error_json: null, ended_at: null }
})
/** A run's creation, known by its id. */
const creationOf = (id: string): GroupWrite => ({ created: { op: 'insertRun', row: { id } as NewRun } })
const idOf = (write: GroupWrite): string => ('created' in write ? write.created.row.id : write.runId)
const idsOf = (batch: ReadonlyArray<GroupWrite>): string[] => batch.map(idOf)

/** The end of the current turn of the event loop, when a group commit's queue is flushed. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/** A thread whose batches settle when the test says: each batch as it was handed over, and a log of what happened. */
const fakeThread = (log: string[]) => {
  const batches: Array<{ readonly ids: string[]; readonly settle: (outcomes: ReadonlyArray<CommitOutcome>) => void; readonly fail: (error: Error) => void }> =
    []
  let inFlight = 0
  let alive = true
  const drained: Array<() => void> = []
  const done = (): void => {
    inFlight -= 1
    if (inFlight === 0) for (const resolve of drained.splice(0)) resolve()
  }
  const thread: ThreadCommitter = {
    commit: (batch) =>
      new Promise((resolve, reject) => {
        inFlight += 1
        const ids = idsOf(batch)
        log.push(`thread ${ids.join(',')}`)
        batches.push({
          ids,
          settle: (outcomes) => {
            done()
            resolve(outcomes)
          },
          fail: (error) => {
            done()
            reject(error)
          }
        })
      }),
    inFlight: () => inFlight,
    alive: () => alive,
    stop: async () => {
      if (inFlight > 0) await new Promise<void>((resolve) => drained.push(resolve))
      log.push('thread stopped')
      alive = false
    }
  }
  return {
    thread,
    batches,
    /** Settles batch `i`: every write holds but those in `failed`. */
    settle: (i: number, failed: Record<string, Error> = {}) =>
      batches[i]!.settle(batches[i]!.ids.map((id) => (id in failed ? { error: failed[id] } : undefined))),
    die: () => {
      alive = false
      inFlight = 0
    }
  }
}

/** A committer over a fake thread; batches made here hold but for the writes in `failHere`. */
const fakeCommitter = (options: { readonly thread?: ReturnType<typeof fakeThread>; readonly failHere?: Record<string, Error>; readonly log: string[] }) => {
  let started = 0
  const committer: BatchCommitter = {
    commitHere: (batch) => {
      options.log.push(`here ${idsOf(batch).join(',')}`)
      const failHere = options.failHere ?? {}
      if ('everything' in failHere) throw failHere['everything']
      return batch.map((write) => (idOf(write) in failHere ? { error: failHere[idOf(write)] } : undefined))
    },
    startThread: () => {
      started += 1
      return options.thread?.thread
    },
    whenConnectionFree: (f) => f()
  }
  return { committer, started: () => started }
}

/** Each write's promise, settled to 'ok' or its error's message, in the log as it settles. */
const track = (log: string[], id: string, promise: Promise<void>): Promise<string> =>
  promise.then(
    () => {
      log.push(`${id} ok`)
      return 'ok'
    },
    (error: Error) => {
      log.push(`${id} ${error.message}`)
      return error.message
    }
  )

const ids = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`)

describe('group commit scheduling', () => {
  it("makes one turn's writes one batch, in the order made, on this thread while it is small, and a failure reaches its own write alone", async () => {
    const log: string[] = []
    const { committer, started } = fakeCommitter({ log, failHere: { c2: new Error('broken key') } })
    const group = groupCommits(committer, LIMITS)
    const settled = Promise.all([
      track(log, 'c1', group.enqueue(commitOf('c1'))),
      track(log, 'r1', group.enqueue(creationOf('r1'))),
      track(log, 'c2', group.enqueue(commitOf('c2')))
    ])
    // Nothing is committed before the turn ends.
    expect(log).toEqual([])
    expect(await settled).toEqual(['ok', 'ok', 'broken key'])
    expect(log.slice(0, 1)).toEqual(['here c1,r1,c2'])
    // Three writes, two of them commits: below the thread's batch, which is never started.
    expect(started()).toBe(0)
    // The next turn's writes are the next batch.
    await track(log, 'c3', group.enqueue(commitOf('c3')))
    expect(log.filter((line) => line.startsWith('here'))).toEqual(['here c1,r1,c2', 'here c3'])
  })

  it('fails every write of a batch that fails as a whole, and none of the next batch', async () => {
    const log: string[] = []
    const failHere: Record<string, Error> = { everything: new Error('disk I/O error') }
    const { committer } = fakeCommitter({ log, failHere })
    const group = groupCommits(committer, LIMITS)
    const first = ['c1', 'c2'].map((id) => track(log, id, group.enqueue(commitOf(id))))
    expect(await Promise.all(first)).toEqual(['disk I/O error', 'disk I/O error'])
    delete failHere['everything']
    expect(await track(log, 'c3', group.enqueue(commitOf('c3')))).toBe('ok')
  })

  it("starts the thread with the first batch of enough transitions' commits, never for creations alone, and hands it batches in order", async () => {
    const log: string[] = []
    const thread = fakeThread(log)
    const { committer, started } = fakeCommitter({ log, thread })
    const group = groupCommits(committer, LIMITS)
    // Five creations: more writes than the thread's batch, but no commit of transitions.
    const creations = ids('r', 5).map((id) => track(log, id, group.enqueue(creationOf(id))))
    await Promise.all(creations)
    expect(started()).toBe(0)
    expect(log[0]).toBe('here r1,r2,r3,r4,r5')
    // Four commits and a creation: the thread's batch, the creation with them.
    const first = [...ids('a', 4).map((id) => track(log, id, group.enqueue(commitOf(id)))), track(log, 'r6', group.enqueue(creationOf('r6')))]
    await nextTurn()
    expect(started()).toBe(1)
    expect(thread.batches.map((batch) => batch.ids)).toEqual([['a1', 'a2', 'a3', 'a4', 'r6']])
    // While the thread has that batch, even a small one goes there, behind it.
    const second = track(log, 'b1', group.enqueue(commitOf('b1')))
    await nextTurn()
    expect(thread.batches.map((batch) => batch.ids)).toEqual([['a1', 'a2', 'a3', 'a4', 'r6'], ['b1']])
    // Outcomes reach the writes of their own batch: the second batch's failure is b1's alone.
    thread.settle(1, { b1: new Error('lease lost') })
    expect(await second).toBe('lease lost')
    thread.settle(0, { a3: new Error('broken key') })
    expect(await Promise.all(first)).toEqual(['ok', 'ok', 'broken key', 'ok', 'ok'])
    // Started once only.
    expect(started()).toBe(1)
  })

  it('hands the queue over every chunk within the turn once the thread runs, and rejects exactly the writes of a batch the thread fails', async () => {
    const log: string[] = []
    const thread = fakeThread(log)
    const { committer } = fakeCommitter({ log, thread })
    const group = groupCommits(committer, LIMITS)
    const warm = ids('w', 4).map((id) => track(log, id, group.enqueue(commitOf(id))))
    await nextTurn()
    thread.settle(0)
    await Promise.all(warm)
    // 20 commits in one turn: two chunks of 8 at once, the last 4 at the end of the turn.
    const writes = ids('c', 20).map((id) => track(log, id, group.enqueue(commitOf(id))))
    expect(thread.batches.slice(1).map((batch) => batch.ids)).toEqual([ids('c', 8), ids('c', 16).slice(8)])
    await nextTurn()
    expect(thread.batches.slice(1).map((batch) => batch.ids)).toEqual([ids('c', 8), ids('c', 16).slice(8), ids('c', 20).slice(16)])
    thread.batches[2]!.fail(new Error('the thread exited'))
    thread.settle(1)
    thread.settle(3)
    const outcomes = await Promise.all(writes)
    expect(outcomes.slice(0, 8)).toEqual(ids('c', 8).map(() => 'ok'))
    expect(outcomes.slice(8, 16)).toEqual(ids('c', 8).map(() => 'the thread exited'))
    expect(outcomes.slice(16)).toEqual(ids('c', 4).map(() => 'ok'))
  })

  it("holds a write of this thread's own until the thread is done, and the commits queued after it until it has run", async () => {
    const log: string[] = []
    const thread = fakeThread(log)
    const { committer } = fakeCommitter({ log, thread })
    const group = groupCommits(committer, LIMITS)
    const first = ids('a', 4).map((id) => track(log, id, group.enqueue(commitOf(id))))
    await nextTurn()
    const own = Promise.resolve(
      group.whenFree(() => {
        log.push('own write')
        return 'written'
      })
    )
    const after = track(log, 'b1', group.enqueue(commitOf('b1')))
    await nextTurn()
    await nextTurn()
    // The write and the commit behind it wait for the thread's batch.
    expect(log).toEqual(['thread a1,a2,a3,a4'])
    thread.settle(0)
    expect(await own).toBe('written')
    await Promise.all([...first, after])
    expect(log).toEqual(['thread a1,a2,a3,a4', 'a1 ok', 'a2 ok', 'a3 ok', 'a4 ok', 'own write', 'here b1', 'b1 ok'])
  })

  it('commits here again once the thread has died', async () => {
    const log: string[] = []
    const thread = fakeThread(log)
    const { committer, started } = fakeCommitter({ log, thread })
    const group = groupCommits(committer, LIMITS)
    const first = ids('a', 4).map((id) => track(log, id, group.enqueue(commitOf(id))))
    await nextTurn()
    thread.die()
    thread.batches[0]!.fail(new Error('the thread exited'))
    expect(await Promise.all(first)).toEqual(ids('a', 4).map(() => 'the thread exited'))
    const next = ids('b', 4).map((id) => track(log, id, group.enqueue(commitOf(id))))
    expect(await Promise.all(next)).toEqual(ids('b', 4).map(() => 'ok'))
    expect(log).toContain('here b1,b2,b3,b4')
    // Never started again.
    expect(started()).toBe(1)
  })

  it('settles what the thread has before close returns, a batch handed over meanwhile too, and commits here after it', async () => {
    const log: string[] = []
    const thread = fakeThread(log)
    const { committer } = fakeCommitter({ log, thread })
    const group = groupCommits(committer, LIMITS)
    const atThread = ids('a', 4).map((id) => track(log, id, group.enqueue(commitOf(id))))
    await nextTurn()
    const queued = track(log, 'b1', group.enqueue(commitOf('b1')))
    const closed = group.close().then(() => log.push('closed'))
    await nextTurn()
    thread.settle(0)
    thread.settle(1)
    await closed
    await Promise.all([...atThread, queued])
    expect(log.indexOf('closed')).toBeGreaterThan(Math.max(...ids('a', 4).map((id) => log.indexOf(`${id} ok`))))
    expect(log.indexOf('thread stopped')).toBeLessThan(log.indexOf('closed'))
    expect(log.indexOf('b1 ok')).toBeLessThan(log.indexOf('closed'))
    expect(thread.batches.map((batch) => batch.ids)).toEqual([ids('a', 4), ['b1']])
    // A batch large enough for the thread, once it is stopped, is made here.
    const later = ids('c', 4).map((id) => track(log, id, group.enqueue(commitOf(id))))
    expect(await Promise.all(later)).toEqual(ids('c', 4).map(() => 'ok'))
    expect(log).toContain('here c1,c2,c3,c4')
  })
})
