import { describe, expect, it } from 'vitest'
import { isStoreOutage, listAttempts, listJournalEntries, listRuns, listSteps, StoreError } from '@agentvisor/store'
import { runCall } from '../../../test/support/run-call.js'
// The outage rider works on a dialect's raw writer (its driver's errors, which tell an outage);
// the store hands it out as a `RunWriter` (`outageRidingWriter`).
import { rideOutStoreOutages } from '../src/outage/outage-writer.js'
import { postgresRawWriter } from '../src/postgres/postgres-run-writer.js'
import type { RawRunWriter as RunWriter } from '../src/run-writer/run-writer.js'
import { SNAPSHOT, attempt, journalTransition, run, step, tempStore } from './support/temp-store.js'

/** What `pg` rejects with when the server goes away with a statement in flight: its outcome is unknown. */
const dropped = (): Error => new Error('Connection terminated unexpectedly')
/** What `pg` rejects with when the server is not there at all. */
const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })

/**
 * The real PostgreSQL writer whose every other reply to a write is lost: the write lands, and the
 * caller hears the connection drop, as when the server restarts between COMMIT and its answer.
 */
const losingFirstReplies = (writer: RunWriter): { writer: RunWriter; calls: string[] } => {
  const calls: string[] = []
  const lose =
    <A extends unknown[], R>(name: string, call: (...args: A) => R | Promise<R>) =>
    async (...args: A): Promise<R> => {
      calls.push(name)
      const result = await call(...args)
      if (calls.filter((c) => c === name).length % 2 === 1) throw dropped()
      return result
    }
  return {
    calls,
    writer: { ...writer, createRun: lose('createRun', writer.createRun), write: lose('write', writer.write), commit: lose('commit', writer.commit) }
  }
}

describe('riding out a store outage', () => {
  it('applies a write whose reply was lost exactly once: the retry meets its own keys and takes it as landed', async () => {
    const store = await tempStore('postgres')
    const lines: string[] = []
    const { writer: inner, calls } = losingFirstReplies(postgresRawWriter(store.pool!))
    const writer = rideOutStoreOutages(inner, { limitMs: 30_000, log: (line) => lines.push(line) })

    expect(await writer.createRun(run(), { owner: 'me', expiresAt: Date.now() + 60_000 })).toBe(1)
    await writer.write('run-1', 1, [{ op: 'insertAttempt', row: attempt() }])
    const head = { state: 'acting', steps: 1, updated_at: 'x', error_json: null, ended_at: null }
    await writer.commit({ runId: 'run-1', leaseToken: 1, writes: [], transitions: [journalTransition({ seq: 1 })], snapshot: SNAPSHOT, head })
    // A step's commit: its journal entry rides in the step's row (one keyed row for both).
    await writer.commit({
      runId: 'run-1',
      leaseToken: 1,
      writes: [{ op: 'insertStep', row: step() }],
      transitions: [journalTransition({ seq: 2 })],
      snapshot: SNAPSHOT,
      head
    })

    // Each was sent twice (the lost reply, then the retry) and is in the store once.
    expect(calls).toEqual(['createRun', 'createRun', 'write', 'write', 'commit', 'commit', 'commit', 'commit'])
    expect((await runCall(listRuns(store.db))).map((r) => r.id)).toEqual(['run-1'])
    expect((await runCall(listAttempts(store.db, 'run-1'))).map((a) => [a.step, a.attempt])).toEqual([[1, 0]])
    expect((await runCall(listJournalEntries(store.db, 'run-1'))).map((e) => e.seq)).toEqual([1, 2])
    expect((await runCall(listSteps(store.db, 'run-1'))).map((s) => s.step)).toEqual([1])
    expect(lines.filter((line) => line.includes('the store is unreachable (Connection terminated unexpectedly)'))).toHaveLength(4)
    expect(lines.filter((line) => line.startsWith('the store answers again after'))).toHaveLength(4)
  })

  it('reports any other failure at once, untouched, without a retry', async () => {
    const lines: string[] = []
    let calls = 0
    const full = Object.assign(new Error('could not extend file: No space left on device'), { code: '53100' })
    const writer = rideOutStoreOutages({ write: () => (calls++, Promise.reject(full)) } as unknown as RunWriter, { limitMs: 30_000, log: (l) => lines.push(l) })
    await expect(writer.write('run-1', 1, [])).rejects.toBe(full)
    expect(calls).toBe(1)
    expect(lines).toEqual([])
  })

  it('gives up past the limit with a StoreError naming the outage, and fails at once after that until the store answers', async () => {
    const lines: string[] = []
    let calls = 0
    let up = false
    const writer = rideOutStoreOutages({ write: () => (calls++, up ? Promise.resolve() : Promise.reject(refused())) } as unknown as RunWriter, {
      limitMs: 300,
      log: (l) => lines.push(l)
    })
    const error = await Promise.resolve(writer.write('run-1', 1, [])).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(StoreError)
    expect((error as StoreError).message).toMatch(/^write: the store was unreachable for 0\.\d s \(connect ECONNREFUSED 127\.0\.0\.1:5432\)$/)
    expect(isStoreOutage(error)).toBe(true)
    expect(calls).toBeGreaterThan(1)
    const tried = calls
    await expect(writer.write('run-1', 1, [])).rejects.toBeInstanceOf(StoreError)
    expect(calls).toBe(tried + 1)
    expect(lines).toEqual([
      'the store is unreachable (connect ECONNREFUSED 127.0.0.1:5432); waiting up to 0.3 s for it to come back, retrying the same writes (nothing runs meanwhile)',
      expect.stringMatching(/^the store is still unreachable after 0\.\d s; the runs waiting for it are interrupted$/)
    ])
    up = true
    await writer.write('run-1', 1, [])
    expect(lines.at(-1)).toMatch(/^the store answers again after \d+\.\d s; the runs waiting for it go on$/)
  })

  it('tells an outage from every other store failure', () => {
    const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code })
    for (const outage of [
      refused(),
      dropped(),
      new Error('Connection terminated due to connection timeout'),
      new Error('timeout exceeded when trying to connect'),
      coded('ECONNRESET'),
      coded('57P01', 'terminating connection due to administrator command'),
      coded('57P03', 'the database system is starting up'),
      coded('53300', 'sorry, too many clients already'),
      coded('08006'),
      coded('55000', 'database "runs" is not currently accepting connections'),
      new StoreError({ message: 'store: commit failed', cause: refused() }),
      Object.assign(new AggregateError([refused()], 'connect failed'), {})
    ])
      expect([outage, isStoreOutage(outage)]).toEqual([outage, true])
    for (const other of [
      coded('23505', 'duplicate key value violates unique constraint'),
      coded('53100', 'could not extend file: No space left on device'),
      coded('28P01', 'password authentication failed for user "app"'),
      coded('55000', 'cannot execute something else'),
      coded('SQLITE_BUSY', 'database is locked'),
      coded('AVL01', 'lease lost: run-1'),
      new Error('Connection refused by policy'),
      new StoreError({ message: 'run run-1: steps.results_json is corrupt' })
    ])
      expect([other, isStoreOutage(other)]).toEqual([other, false])
  })
})
