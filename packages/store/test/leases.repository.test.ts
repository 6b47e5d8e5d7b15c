import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import {
  acquireLease,
  appendTransition,
  insertRun,
  isCancelRequested,
  LeaseLostError,
  leaseStates,
  listTransitions,
  openStore,
  releaseLease,
  renewLease,
  renewLeasesOf,
  requestCancel,
  type Executor,
  type Store
} from '@agentvisor/store'
import { DIALECTS, run, tempLocation, tempStore, transition } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'
// A statement of a transaction's body (the Kysely writer's), not a store call: not in the index.
import { checkFence } from '../src/repositories/leases.repository.js'

const never = () => false

describe.each(DIALECTS)('run leases on %s', (dialect) => {
  it('lets one owner hold a run; a second live owner gets the holder back', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    expect(await runCall(acquireLease(db, { runId: 'run-1', owner: 'a', now: 1000, ttlMs: 500, isAbandoned: never }))).toEqual({ token: 1 })
    expect(await runCall(acquireLease(db, { runId: 'run-1', owner: 'b', now: 1200, ttlMs: 500, isAbandoned: never }))).toEqual({
      holder: { owner: 'a', expiresAt: 1500 }
    })
    expect(await runCall(acquireLease(db, { runId: 'missing', owner: 'b', now: 1200, ttlMs: 500, isAbandoned: never }))).toBeUndefined()
  })

  it('hands an expired or abandoned lease over with a new fencing token, and fences the old driver out', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(acquireLease(db, { runId: 'run-1', owner: 'a', now: 1000, ttlMs: 500, isAbandoned: never }))
    expect(await runCall(acquireLease(db, { runId: 'run-1', owner: 'b', now: 1600, ttlMs: 500, isAbandoned: never }))).toEqual({ token: 2 })
    expect(await runCall(acquireLease(db, { runId: 'run-1', owner: 'c', now: 1700, ttlMs: 500, isAbandoned: (o) => o === 'b' }))).toEqual({ token: 3 })
    await expect(checkFence(db, 'run-1', 2)).rejects.toBeInstanceOf(LeaseLostError)
    expect(await runCall(renewLease(db, 'run-1', 2, 9999))).toBe(false)
    await expect(checkFence(db, 'run-1', 3)).resolves.toBeUndefined()
    expect(await runCall(renewLease(db, 'run-1', 3, 9999))).toBe(true)
  })

  it('frees the lease on release only for the current token', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(acquireLease(db, { runId: 'run-1', owner: 'a', now: 1000, ttlMs: 500, isAbandoned: never }))
    await runCall(releaseLease(db, 'run-1', 7))
    expect(await runCall(acquireLease(db, { runId: 'run-1', owner: 'b', now: 1100, ttlMs: 500, isAbandoned: never }))).toMatchObject({ holder: { owner: 'a' } })
    await runCall(releaseLease(db, 'run-1', 1))
    expect(await runCall(acquireLease(db, { runId: 'run-1', owner: 'b', now: 1100, ttlMs: 500, isAbandoned: never }))).toEqual({ token: 2 })
  })

  it('renews every lease of one owner at once and reads lease states by id', async () => {
    const { db } = await tempStore(dialect)
    for (const id of ['r1', 'r2', 'r3']) await runCall(insertRun(db, run({ id })))
    await runCall(acquireLease(db, { runId: 'r1', owner: 'a', now: 1000, ttlMs: 500, isAbandoned: never }))
    await runCall(acquireLease(db, { runId: 'r2', owner: 'a', now: 1000, ttlMs: 500, isAbandoned: never }))
    await runCall(acquireLease(db, { runId: 'r3', owner: 'b', now: 1000, ttlMs: 500, isAbandoned: never }))
    await runCall(requestCancel(db, 'r2', 't'))
    // Epoch milliseconds of today: past what a 32-bit integer holds.
    expect(await runCall(renewLeasesOf(db, 'a', 1_764_417_600_000))).toBe(2)
    const states = await runCall(leaseStates(db, ['r2', 'r1', 'missing']))
    expect([...states].sort((x, y) => (x.id < y.id ? -1 : 1))).toEqual([
      { id: 'r1', lease_owner: 'a', lease_token: 1, cancel_requested_at: null },
      { id: 'r2', lease_owner: 'a', lease_token: 1, cancel_requested_at: 't' }
    ])
    expect(await runCall(acquireLease(db, { runId: 'r1', owner: 'b', now: 1_764_417_599_999, ttlMs: 500, isAbandoned: never }))).toEqual({
      holder: { owner: 'a', expiresAt: 1_764_417_600_000 }
    })
  })

  it('records a cancel request once and reports it', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    expect(await runCall(isCancelRequested(db, 'run-1'))).toBe(false)
    expect(await runCall(requestCancel(db, 'run-1', 't'))).toBe(true)
    expect(await runCall(requestCancel(db, 'run-1', 't2'))).toBe(true)
    expect(await runCall(isCancelRequested(db, 'run-1'))).toBe(true)
    expect(await runCall(requestCancel(db, 'nope', 't'))).toBe(false)
  })
})

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** `count` stores on one fresh PostgreSQL database, each with its own pool: as many hosts. */
async function hosts(count: number): Promise<Store[]> {
  const location = await tempLocation('postgres', { migrated: true })
  return Promise.all(Array.from({ length: count }, () => openStore(location)))
}

/** Resolves once some session of this database waits for a lock (seen from another session). */
async function someoneWaitsForALock(db: Executor): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const { rows } = await sql<{
      n: number
    }>`select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(db)
    if (Number(rows[0]?.n) > 0) return
    await sleep(25)
  }
  throw new Error('no session ever waited for a lock')
}

/** A promise and the function that settles it. */
function gate(): { readonly opened: Promise<void>; readonly open: () => void } {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { opened, open }
}

// The run's lease between drivers on different hosts, each with its own pool, on PostgreSQL
// (on SQLite a database write lock serialises every writer; see transaction.test.ts).
describe('run leases across PostgreSQL hosts', () => {
  it('makes a takeover wait for a fenced write that checked first, then fences the old driver out', async () => {
    const [a, b] = (await hosts(2)) as [Store, Store]
    const checked = gate()
    const proceed = gate()
    try {
      await runCall(insertRun(a.db, run()))
      expect(await runCall(acquireLease(a.db, { runId: 'run-1', owner: 'a', now: 1000, ttlMs: 500, isAbandoned: never }))).toEqual({ token: 1 })
      const write = a.db.transaction().execute(async (trx) => {
        await checkFence(trx, 'run-1', 1)
        checked.open()
        await proceed.opened
        await runCall(appendTransition(trx, transition({ seq: 1, event: 'LATE_BUT_FENCED' })))
      })
      await checked.opened

      let tookOver = false
      const takeover = runCall(acquireLease(b.db, { runId: 'run-1', owner: 'b', now: 2000, ttlMs: 500, isAbandoned: never })).then((result) => {
        tookOver = true
        return result
      })
      await someoneWaitsForALock(b.db)
      expect(tookOver).toBe(false)

      proceed.open()
      await write
      expect(await takeover).toEqual({ token: 2 })
      expect((await runCall(listTransitions(b.db, 'run-1'))).map((row) => row.event)).toEqual(['LATE_BUT_FENCED'])
      await expect(a.db.transaction().execute((trx) => checkFence(trx, 'run-1', 1))).rejects.toBeInstanceOf(LeaseLostError)
    } finally {
      proceed.open() // a failed expectation must not leave the transaction open
      await Promise.all([a.close(), b.close()])
    }
  })

  it('makes a fenced write wait for a takeover in progress, then refuses it', async () => {
    const [a, b] = (await hosts(2)) as [Store, Store]
    const acquired = gate()
    const commit = gate()
    try {
      await runCall(insertRun(a.db, run()))
      await runCall(acquireLease(a.db, { runId: 'run-1', owner: 'a', now: 1000, ttlMs: 500, isAbandoned: never }))
      const takeover = b.db.transaction().execute(async (trx) => {
        const result = await runCall(acquireLease(trx, { runId: 'run-1', owner: 'b', now: 2000, ttlMs: 500, isAbandoned: never }))
        acquired.open()
        await commit.opened
        return result
      })
      await acquired.opened

      const write = a.db.transaction().execute(async (trx) => {
        await checkFence(trx, 'run-1', 1)
        await runCall(appendTransition(trx, transition({ seq: 1, event: 'STALE' })))
      })
      const settled = write.then(
        () => 'written',
        (error: unknown) => error
      )
      await someoneWaitsForALock(a.db)
      commit.open()
      expect(await takeover).toEqual({ token: 2 })
      expect(await settled).toBeInstanceOf(LeaseLostError)
      expect(await runCall(listTransitions(a.db, 'run-1'))).toEqual([])
    } finally {
      commit.open()
      await Promise.all([a.close(), b.close()])
    }
  })

  it('keeps one holder at a time with tokens rising by one while eight hosts race, and refuses every stale write', async () => {
    const HOSTS = 8
    const TTL_MS = 15
    const stores = await hosts(HOSTS)
    const runId = 'run-1'
    const deadline = Date.now() + 1500
    // Every acquisition and every fenced write appends a transition in the same transaction, so
    // the transitions, in seq order, are the history as PostgreSQL committed it. A seq is the
    // next free one: two writers at once (a failed fence) would collide on the primary key.
    const append = async (trx: Executor, event: 'acquire' | 'write', owner: string, token: number, now: number) => {
      const last = await trx
        .selectFrom('transitions')
        .select((eb) => eb.fn.max('seq').as('seq'))
        .where('run_id', '=', runId)
        .executeTakeFirst()
      await runCall(
        appendTransition(
          trx,
          transition({ seq: Number(last?.seq ?? 0) + 1, event, from_state: owner, to_state: String(token), snapshot_json: JSON.stringify({ now }) })
        )
      )
    }
    const tally = { acquired: 0, written: 0, refused: 0, owners: new Set<string>() }

    const drive = async (store: Store, owner: string): Promise<void> => {
      while (Date.now() < deadline) {
        const now = Date.now()
        const lease = await store.db.transaction().execute(async (trx) => {
          const result = await runCall(acquireLease(trx, { runId, owner, now, ttlMs: TTL_MS, isAbandoned: never }))
          if (result !== undefined && 'token' in result) await append(trx, 'acquire', owner, result.token, now)
          return result
        })
        if (lease === undefined || !('token' in lease)) {
          await sleep(Math.random() * TTL_MS)
          continue
        }
        tally.acquired++
        tally.owners.add(owner)
        // Write as the holder and never renew: the lease runs out under the writes and another
        // host takes over while one is in flight (the sleep holds the transaction open).
        while (Date.now() < deadline) {
          try {
            await store.db.transaction().execute(async (trx) => {
              await checkFence(trx, runId, lease.token)
              await sleep(Math.random() * 3)
              await append(trx, 'write', owner, lease.token, Date.now())
            })
            tally.written++
          } catch (error) {
            if (!(error instanceof LeaseLostError)) throw error
            tally.refused++
            break
          }
        }
      }
    }

    try {
      await runCall(insertRun(stores[0]!.db, run({ id: runId })))
      await Promise.all(stores.map((store, index) => drive(store, `host-${index}`)))

      let token = 0
      let holder: string | undefined
      let expiresAt = -Infinity
      for (const row of await runCall(listTransitions(stores[0]!.db, runId))) {
        const rowToken = Number(row.to_state)
        if (row.event === 'acquire') {
          const { now } = JSON.parse(row.snapshot_json!) as { now: number }
          expect(rowToken).toBe(token + 1) // strictly increasing, no gaps, no duplicates
          if (row.from_state !== holder) expect(now).toBeGreaterThanOrEqual(expiresAt) // taken over only once expired
          token = rowToken
          holder = row.from_state
          expiresAt = now + TTL_MS
        } else {
          // Only the current holder's writes went in: none with a superseded token.
          expect([row.from_state, rowToken]).toEqual([holder, token])
        }
      }
      expect(token).toBe(tally.acquired)
      expect(tally.owners.size).toBeGreaterThan(1)
      expect(tally.written).toBeGreaterThan(0)
      expect(tally.refused).toBeGreaterThan(1)
    } finally {
      await Promise.all(stores.map((store) => store.close()))
    }
  })
})
