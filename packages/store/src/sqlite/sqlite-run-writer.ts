import type { RememberedRuleRow } from '../tables/remembered-rules.table.js'
import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from '../database.js'
import { LeaseLostError } from '../errors.js'
import type { RunCreation } from '../run-writer/run-write.js'
import { FIRST_LEASE_TOKEN, leasedRun, type RawRunWriter } from '../run-writer/run-writer.js'
import type { LeaseAcquisition, LeaseRequest } from '../repositories/leases.repository.js'
import type { StoredRunRow } from '../tables/runs.table.js'
import type { StoredStepRow } from '../tables/steps.table.js'
import type { JournalHead } from '../repositories/journal-entries.repository.js'
import type { StoredApprovalRow } from '../tables/approvals.table.js'
import type { StoredToolEffectRow } from '../tables/tool-effects.table.js'
import { decodeApprovalRow } from '../tables/approvals.columns.js'
import { decodeRunWithContract } from '../tables/runs.columns.js'
import { decodeStepRow } from '../tables/steps.columns.js'
import { decodeToolEffectRow } from '../tables/tool-effects.columns.js'
import { decodeRow, decodeRows, decodeText, encodeText } from '../text-codec.js'
import { RUN_ATTEMPT_TOTALS_GROUP, RUN_ATTEMPT_TOTALS_SELECT, type TotalsRow, totalsOf } from '../repositories/run-usage.repository.js'
import { startCheckpointer } from './checkpointer.js'
import { commitThreadScript, startCommitThread } from './commit-thread.js'
import { sqliteCommits } from './sqlite-commits.js'
import { type GroupCommitLimits, groupCommits, type ThreadCommitter } from './group-commit.js'
import { encodeGroup } from './commit-wire.js'
import { BUSY_TIMEOUT_MS } from './sqlite-reader.js'

/**
 * A group commit of this many commits goes to the commit thread (commit-thread.ts) rather than
 * being made on the main thread: below it, the hand-over costs about what it saves. Once the
 * thread runs, the queue is handed over as soon as 64 commits are queued, without waiting for
 * the end of the event loop's turn: the thread commits them while the main thread goes on with
 * the runs of the same turn, and the first runs' next steps are ready when it is done.
 */
const GROUP_COMMIT_LIMITS: GroupCommitLimits = { threadMinBatch: 16, threadChunk: 64 }

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
 * Group commits of many runs go to the commit thread when the file has one (docs/durability.md,
 * "Group commit"); while any is there, every other write of this writer waits until the thread
 * is done (it holds the file's write lock meanwhile, and a write here would wait for it on the
 * main thread, synchronously), and new commits queue behind them.
 */
export function sqliteRawWriter(db: Kysely<Database>, sqlite: BetterSqlite3.Database): RawRunWriter {
  const { statement, update, apply, writeHead, fence, commitNow, writeNow, commitAll } = sqliteCommits(sqlite)

  // Checkpoints move off the hot path into a worker thread (see checkpointer.ts).
  const onDisk = sqlite.name !== '' && sqlite.name !== ':memory:' && !sqlite.memory
  const checkpointer = onDisk ? startCheckpointer(sqlite.name) : undefined
  if (checkpointer !== undefined) sqlite.pragma('wal_autocheckpoint = 0')
  // Found now, so that a store whose thread could not start fails at once (CommitThreadMissing).
  const script = onDisk ? commitThreadScript() : undefined
  // The thread costs ~20 MB of the process's memory: it is started by the first group commit
  // large enough for it (docs/durability.md, "Group commit"), never for a process that drives
  // one run at a time.
  const startThread = (): ThreadCommitter | undefined => {
    if (script === undefined) return undefined
    const thread = startCommitThread(script, { file: sqlite.name, busyTimeoutMs: BUSY_TIMEOUT_MS })
    return { ...thread, commit: (batch) => thread.commit(encodeGroup(batch)) }
  }
  const { enqueue, whenFree, close } = groupCommits(
    {
      commitHere: commitAll,
      startThread,
      // Kysely keeps a transaction open across awaits: a write waits for its connection lock.
      whenConnectionFree: (f) => (sqlite.inTransaction ? db.connection().execute(async () => f()) : f())
    },
    GROUP_COMMIT_LIMITS
  )

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
    loadRun: (runId) => {
      const run = statement('SELECT runs.*, run_contracts.contract_json FROM runs JOIN run_contracts ON run_contracts.run_id = runs.id WHERE runs.id = ?').get(
        runId
      ) as (StoredRunRow & { contract_json: string }) | undefined
      if (run === undefined) return undefined
      // The run's last entry: one seek to the end of its range, then back past the few rows after it.
      const last = statement(LAST_ENTRY).get(runId) as JournalHead | undefined
      const steps = statement(STEPS).all(runId) as StoredStepRow[]
      // The JSON columns are decoded here, on read, through their Schemas (docs/durability.md,
      // "Corrupt rows"); a corrupt one throws StoreError. Writes are never re-validated.
      return { run: decodeRunWithContract(decodeRow(run)), last: decodeRow(last), steps: decodeRows(steps).map(decodeStepRow) }
    },
    acquireLease: (input) => whenFree(() => acquireNow(input)),
    attemptTotals: (runId) => totalsOf(decodeRows(statement(ATTEMPT_TOTALS).all(encodeText(runId)) as TotalsRow[])),
    attemptRecorded: (runId, step, attempt) =>
      statement("SELECT 1 FROM run_log WHERE run_id = ? AND step = ? AND kind = 'a' AND n = ?").get(runId, step, attempt) !== undefined,
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
    approvals: (runId, step) =>
      decodeRows(
        statement('SELECT * FROM approvals WHERE run_id = ? AND step = ? ORDER BY step, position, created_at, id').all(runId, step) as StoredApprovalRow[]
      ).map(decodeApprovalRow),
    rememberedRules: (workspace) =>
      decodeRows(
        statement('SELECT * FROM remembered_rules WHERE workspace = ? ORDER BY created_at, act, pattern').all(encodeText(workspace)) as RememberedRuleRow[]
      ),
    // Through `whenFree`: a Kysely transaction still open may yet roll back what it wrote.
    lastStepText: (runId) =>
      whenFree(() => {
        const row = statement(LAST_STEP_TEXT).get(encodeText(runId)) as { text: string } | undefined
        return row === undefined ? undefined : decodeText(row.text)
      }),
    toolEffects: (runId, step) => decodeRows(statement(TOOL_EFFECTS).all(runId, step) as StoredToolEffectRow[]).map(decodeToolEffectRow),
    close: async () => {
      // What the commit thread has settles first: its runs wait on it.
      await close()
      if (checkpointer === undefined) return
      await checkpointer.stop()
      if (sqlite.open) sqlite.pragma('wal_autocheckpoint = 1000')
    }
  }
}

/** What a run created in a group commit resolves to: its first fencing token. */
const created = (): number => FIRST_LEASE_TOKEN

// The reads of `run_log` by its key `(run_id, step, kind, n)`, with the columns the old tables had.
const LAST_ENTRY = "SELECT n AS seq, snapshot_json FROM run_log WHERE run_id = ? AND kind = 'j' ORDER BY step DESC, kind DESC, n DESC LIMIT 1"
const STEPS =
  "SELECT run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at FROM run_log WHERE run_id = ? AND kind = 's' ORDER BY step"
const ATTEMPT_TOTALS = `${RUN_ATTEMPT_TOTALS_SELECT} FROM run_log WHERE run_id = ? AND kind = 'a' ${RUN_ATTEMPT_TOTALS_GROUP}`
const LAST_STEP_TEXT = "SELECT text FROM run_log WHERE run_id = ? AND kind = 's' AND text != '' ORDER BY step DESC LIMIT 1"
const TOOL_EFFECTS =
  "SELECT run_id, step, n AS position, tool_call_id, name, arguments, status, result_json, started_at, completed_at FROM run_log WHERE run_id = ? AND step = ? AND kind = 't' ORDER BY n"
