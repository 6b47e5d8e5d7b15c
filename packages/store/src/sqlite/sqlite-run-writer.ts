import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from '../database.js'
import { LeaseLostError } from '../errors.js'
import type { RunCreation } from '../run-writer/run-write.js'
import { FIRST_LEASE_TOKEN, leasedRun, type RawRunWriter } from '../run-writer/run-writer.js'
import type { LeaseAcquisition, LeaseRequest } from '../repositories/leases.repository.js'
import { encodeText } from '../text-codec.js'
import { sqliteCommits } from './sqlite-commits.js'
import { sqliteRunReads } from './run-reads.js'
import { sqliteWriteQueue } from './write-queue.js'

/**
 * The SQLite `RawRunWriter`: every write of a transition is a cached prepared statement, all of
 * them in one synchronous `BEGIN IMMEDIATE` transaction, with the fence folded into the run's
 * own update (`WHERE lease_token = ?`). No query is built and no promise is made on this path:
 * at every step that is most of what a durable transition costs through Kysely.
 *
 * It shares its connection with the store's Kysely instance. Kysely keeps a transaction open
 * across awaits (an approval decision, a migration); a synchronous write issued meanwhile
 * would land inside that transaction. So when one is open, the write waits for Kysely's
 * connection lock (held until that transaction ends) and then runs.
 *
 * Group commits of many runs go to the commit thread when the file has one (write-queue.ts;
 * docs/durability.md, "Group commit"); while any is there, every other write of this writer waits
 * until the thread is done (it holds the file's write lock meanwhile, and a write here would wait
 * for it on the main thread, synchronously), and new commits queue behind them. Its reads are
 * run-reads.ts's, its writes sqlite-commits.ts's.
 */
export function sqliteRawWriter(db: Kysely<Database>, sqlite: BetterSqlite3.Database): RawRunWriter {
  const { statement, update, apply, writeHead, fence, commitNow, writeNow, commitAll } = sqliteCommits(sqlite)
  const reads = sqliteRunReads(statement)

  const { enqueue, whenFree, close } = sqliteWriteQueue(db, sqlite, commitAll)

  const createNow = sqlite
    .transaction((creation: RunCreation) => {
      apply(creation.created)
      return FIRST_LEASE_TOKEN
    })
    .immediate.bind(null)

  const acquireNow = sqlite
    .transaction((input: LeaseRequest): LeaseAcquisition | undefined => {
      // The same decision as `acquireLease`, made while holding the write lock.
      const run = statement('SELECT lease_owner, lease_expires_at, lease_token FROM runs WHERE id = ?').get(input.runId) as
        | { lease_owner: string | null; lease_expires_at: number | null; lease_token: number }
        | undefined
      if (run === undefined) return undefined
      const held = run.lease_owner !== null && run.lease_expires_at !== null && run.lease_expires_at > input.now
      if (held && run.lease_owner !== input.owner && !input.isAbandoned(run.lease_owner!)) {
        return { holder: { owner: run.lease_owner!, expiresAt: run.lease_expires_at! } }
      }
      const token = run.lease_token + 1
      update('runs', { lease_owner: input.owner, lease_expires_at: input.now + input.ttlMs, lease_token: token }, 'id = ? AND lease_token = ?', [
        input.runId,
        run.lease_token
      ])
      return { token }
    })
    .immediate.bind(null)

  const settleNow = sqlite
    .transaction((runId: string, leaseToken: number, outcome: string, at: string): number => {
      fence(encodeText(runId), leaseToken)
      return update('run_log', { outcome, settled_at: at }, "run_id = ? AND kind = 'a' AND outcome = 'pending'", [runId])
    })
    .immediate.bind(null)

  return {
    // Among other runs, a run's creation may share their group commit too (docs/durability.md,
    // "Group commit"): its row's INSERTs go with theirs, in the same transaction and log write.
    createRun: (row, lease, options) => {
      const creation: RunCreation = { created: { op: 'insertRun', row: leasedRun(row, lease) } }
      return options?.batch === true ? enqueue(creation).then(created) : whenFree(() => createNow(creation))
    },
    loadRun: reads.loadRun,
    acquireLease: (input) => whenFree(() => acquireNow(input)),
    attemptTotals: reads.attemptTotals,
    attemptRecorded: reads.attemptRecorded,
    releaseLease: (runId, leaseToken, usageJson) =>
      whenFree(
        () =>
          void update(
            'runs',
            usageJson === undefined ? { lease_owner: null, lease_expires_at: null } : { lease_owner: null, lease_expires_at: null, usage_json: usageJson },
            'id = ? AND lease_token = ?',
            [runId, leaseToken]
          )
      ),
    settlePending: (runId, leaseToken, outcome, at) => whenFree(() => settleNow(runId, leaseToken, outcome, at)),
    commit: (commit, options) => (options?.batch === true ? enqueue(commit) : whenFree(() => commitNow(commit))),
    refreshHead: (runId, leaseToken, head) =>
      whenFree(() => {
        if (writeHead({ runId, leaseToken, head: { ...head, status: undefined } }) === 0) throw new LeaseLostError({ runId })
      }),
    write: (runId, leaseToken, writes) => whenFree(() => writeNow(runId, leaseToken, writes)),
    approvals: reads.approvals,
    rememberedRules: reads.rememberedRules,
    // Through `whenFree`: a Kysely transaction still open may yet roll back what it wrote.
    lastStepText: (runId) => whenFree(() => reads.lastStepText(runId)),
    toolEffects: reads.toolEffects,
    close
  }
}

/** What a run created in a group commit resolves to: its first fencing token. */
const created = (): number => FIRST_LEASE_TOKEN
