import { describe, expect, it } from 'vitest'
import {
  acquireLease,
  kyselyRunWriter,
  LeaseLostError,
  type RunWrite,
  type RunWriter,
  sqliteRunWriter,
  type Store,
  type TransitionCommit
} from '@agentvisor/store'
import { attempt, journalTransition, run, step, tempStore } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

// A differential test of the store's commit thread (docs/durability.md, "Group commit"): the same
// random sequence of runs' creations, commits, fenced writes, lease thefts and releases goes
// through the SQLite run writer, whose group commits cross to the commit thread as a wire
// (commit-wire.ts) and come back as replies matched by request id (commit-protocol.ts), and
// through the plain Kysely writer, one transaction per call, each into a store of its own. Both
// stores must then hold the very same rows in every table and view, and every call must have
// had the same outcome. A header value read from the wrong offset changes a row; a reply given
// to the wrong batch moves a failure onto another run's commit.

/** mulberry32: a small seeded PRNG, so that a failing sequence can be replayed from its seed. */
const prng = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Text the store encodes (NUL and DLE, text-codec.ts) among plain text. */
const ODD = 'a\u0000b\u0010c'

/** One call of the sequence, made the same way on both writers. */
type Call =
  | { readonly kind: 'create'; readonly runId: string }
  | { readonly kind: 'commits'; readonly commits: ReadonlyArray<TransitionCommit> }
  | { readonly kind: 'write'; readonly runId: string; readonly writes: ReadonlyArray<RunWrite> }
  | { readonly kind: 'steal'; readonly runId: string }
  | { readonly kind: 'release'; readonly runId: string; readonly usageJson: string }
  | { readonly kind: 'settle'; readonly runId: string }

/**
 * A random sequence: runs created, then rounds in which most runs commit at once (a group commit
 * of 64 or more, so that batches reach the thread back to back), with fenced writes, settlements,
 * lease thefts and releases between rounds. Some commits break a key (a step inserted twice).
 */
const sequenceOf = (random: () => number, runs: number, rounds: number): Call[] => {
  const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]!
  const ids = Array.from({ length: runs }, (_, i) => `run-${String(i + 1).padStart(3, '0')}`)
  const calls: Call[] = ids.map((runId) => ({ kind: 'create', runId }))
  const seq = new Map(ids.map((id) => [id, 0]))
  const steps = new Map(ids.map((id) => [id, 0]))
  for (let round = 0; round < rounds; round++) {
    const commits: TransitionCommit[] = []
    for (const runId of ids) {
      if (random() < 0.15) continue
      const at = steps.get(runId)! + 1
      const text = random() < 0.3 ? ODD : `text ${round}`
      const writes: RunWrite[] = []
      if (random() < 0.8) {
        writes.push({ op: 'insertAttempt', row: attempt({ run_id: runId, step: at, attempt: 0 }) })
        writes.push(
          random() < 0.7
            ? {
                op: 'settleAttempt',
                runId,
                step: at,
                attempt: 0,
                patch: { outcome: 'ok', settled_at: `s${round}`, latency_ms: round, tokens_in: 3, tokens_out: 5 }
              }
            : {
                op: 'settleAttempt',
                runId,
                step: at,
                attempt: 0,
                patch: { outcome: 'failed', settled_at: `s${round}`, error_kind: 'transient', http_status: 503, error_message: text }
              }
        )
      }
      if (random() < 0.2)
        writes.push({
          op: 'insertAttempt',
          row: attempt({ run_id: runId, step: at, attempt: 1, error_kind: 'transient', error_message: text, partial_text: text })
        })
      writes.push({ op: 'insertStep', row: step({ run_id: runId, step: at, text, tokens_in: round }) })
      if (random() < 0.5) writes.push({ op: 'setStepResults', runId, step: at, resultsJson: JSON.stringify([{ toolCallId: 'c1', output: text }]) })
      if (random() < 0.3 && at > 1) writes.push({ op: 'setStepFeedback', runId, step: at - 1, feedback: text })
      // A step inserted again: the commit breaks the step's key, and rolls back alone.
      if (random() < 0.05 && at > 1) writes.push({ op: 'insertStep', row: step({ run_id: runId, step: at - 1 }) })
      if (random() < 0.3) {
        writes.push({
          op: 'startToolEffect',
          row: { run_id: runId, step: at, position: 0, tool_call_id: 'c1', name: 'exec', arguments: text, started_at: 'x' }
        })
        if (random() < 0.7) writes.push({ op: 'completeToolEffect', runId, step: at, position: 0, resultJson: '{"ok":true}', at: text })
      }
      if (random() < 0.1) {
        writes.push({
          op: 'insertApproval',
          row: {
            id: `ap-${runId}-${at}`,
            run_id: runId,
            step: at,
            position: 0,
            tool_call_id: 'c1',
            kind: 'approval',
            act: 'exec',
            target: text,
            payload_json: '{}',
            rule: '*',
            layer: 'team',
            source: null,
            edited_payload_json: null,
            created_at: 'x',
            decided_at: null
          }
        })
      }
      if (random() < 0.1) {
        writes.push({
          op: 'insertPolicyEvents',
          rows: [
            {
              run_id: runId,
              step: at,
              kind: 'refusal',
              act: 'write',
              target: text,
              rule: 'secrets/**',
              layer: 'base',
              decision: 'deny',
              source: 'policy',
              request_id: null,
              performed_target: null,
              at: 'x'
            }
          ]
        })
      }
      const first = seq.get(runId)! + 1
      const count = random() < 0.2 ? 0 : 1 + Math.floor(random() * 3)
      seq.set(runId, first + count - 1)
      steps.set(runId, at)
      const ended = random() < 0.03
      commits.push({
        runId,
        leaseToken: 1,
        writes,
        transitions: Array.from({ length: count }, (_, i) => journalTransition({ seq: first + i, to: pick(['acting', 'verifying', 'dispatching']) })),
        snapshot: `{"v":1,"snapshot":{"round":${round}}}`,
        head: {
          ...(random() < 0.2 ? { status: ended ? 'failed' : 'running' } : {}),
          state: pick(['acting', 'verifying', text]),
          steps: at,
          updated_at: `u${round}`,
          error_json: ended ? '{"kind":"x"}' : null,
          ended_at: ended ? `e${round}` : null
        }
      })
    }
    calls.push({ kind: 'commits', commits })
    for (let i = 0; i < 3; i++) {
      const runId = pick(ids)
      calls.push({ kind: 'write', runId, writes: [{ op: 'insertAttempt', row: attempt({ run_id: runId, step: steps.get(runId)! + 1, attempt: 5 + i }) }] })
    }
    calls.push({ kind: 'settle', runId: pick(ids) })
    // The first round always steals a lease, so that every sequence has fenced-out commits after it.
    if (round === 0 || random() < 0.5) calls.push({ kind: 'steal', runId: pick(ids) })
    if (random() < 0.3) calls.push({ kind: 'release', runId: pick(ids), usageJson: `{"round":${round}}` })
  }
  return calls
}

/** What became of a call: it held, its lease was lost, or it failed otherwise. */
const outcomeOf = (call: () => unknown): Promise<string> =>
  new Promise((resolve) => resolve(call())).then(
    () => 'ok',
    (error: unknown) => (error instanceof LeaseLostError ? 'lost' : 'failed')
  )

/** Plays the sequence on `writer`; `together` makes each round's commits one group commit. */
const play = async (store: Store, writer: RunWriter, calls: ReadonlyArray<Call>, together: boolean): Promise<string[]> => {
  const outcomes: string[] = []
  for (const call of calls) {
    switch (call.kind) {
      case 'create':
        outcomes.push(await outcomeOf(() => runCall(writer.createRun(run({ id: call.runId, goal: ODD }), { owner: 'me', expiresAt: 5000 }))))
        break
      case 'commits':
        if (together) outcomes.push(...(await Promise.all(call.commits.map((commit) => outcomeOf(() => runCall(writer.commit(commit, { batch: true })))))))
        else for (const commit of call.commits) outcomes.push(await outcomeOf(() => runCall(writer.commit(commit))))
        break
      case 'write':
        outcomes.push(await outcomeOf(() => runCall(writer.write(call.runId, 1, call.writes))))
        break
      case 'settle':
        outcomes.push(await outcomeOf(() => runCall(writer.settlePending(call.runId, 1, 'cancelled', 'z'))))
        break
      case 'steal':
        await runCall(acquireLease(store.db, { runId: call.runId, owner: 'thief', now: 9000, ttlMs: 500, isAbandoned: () => false }))
        break
      case 'release':
        outcomes.push(await outcomeOf(() => runCall(writer.releaseLease(call.runId, 1, call.usageJson))))
        break
    }
  }
  return outcomes
}

/**
 * Every table and view of the store but the migrations' own, each row as JSON, sorted. A rowid
 * (an INTEGER PRIMARY KEY) is left out: it numbers rows in the order their statements ran, and
 * the two writers run a commit's statements in different orders (the fence first, or last).
 * Without `entrySteps`, the step a journal entry's row sits at in `run_log` is left out too: the
 * Kysely writer inserts the entry before it updates the run's row, so its entry sits at the
 * run's `steps + 1` before the commit, where the prepared statements put it after (no view reads
 * it: an entry is found by its seq).
 */
const dump = (store: Store, entrySteps: boolean): Record<string, string[]> => {
  const sqlite = store.sqlite!
  const names = sqlite
    .prepare("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'kysely_%' ORDER BY name")
    .pluck()
    .all() as string[]
  const rowidOf = (name: string): string | undefined =>
    (sqlite.pragma(`table_info("${name}")`) as Array<{ name: string; type: string; pk: number }>).find(
      (column) => column.pk === 1 && column.type.toUpperCase() === 'INTEGER'
    )?.name
  return Object.fromEntries(
    names.map((name) => {
      const rowid = rowidOf(name)
      const rows = sqlite.prepare(`SELECT * FROM "${name}"`).all() as Array<Record<string, unknown>>
      const masked = (row: Record<string, unknown>): Record<string, unknown> => ({
        ...row,
        ...(rowid === undefined ? {} : { [rowid]: undefined }),
        ...(!entrySteps && name === 'run_log' && row['kind'] === 'j' ? { step: undefined } : {})
      })
      return [name, rows.map((row) => JSON.stringify(masked(row))).sort()]
    })
  )
}

// SQLite's `data_version` on a connection changes when another connection commits, never for its own.
const dataVersion = (store: Store): number => store.sqlite!.pragma('data_version', { simple: true }) as number

describe('the SQLite commit thread against the plain Kysely writer', () => {
  const seeds = process.env['AGENTVISOR_DIFF_SEED'] !== undefined ? [Number(process.env['AGENTVISOR_DIFF_SEED'])] : [Date.now() % 1_000_000, 1, 2]
  it.each(seeds)('gives the same rows and the same outcomes for a random sequence (seed %i; replay with AGENTVISOR_DIFF_SEED)', async (seed) => {
    const calls = sequenceOf(prng(seed), 100, 6)
    const threaded = await tempStore('sqlite')
    const threadedWriter = sqliteRunWriter(threaded.db, threaded.sqlite!)
    const before = dataVersion(threaded)
    const threadedOutcomes = await play(threaded, threadedWriter, calls, true)
    await runCall(threadedWriter.close())
    // The group commits were made by the thread, on its own connection.
    expect(dataVersion(threaded), `seed ${seed}`).not.toBe(before)
    // The plain Kysely writer, one transaction per call; and the prepared statements on the
    // store's own connection, one commit at a time, which put every row where the thread does.
    const plain = await tempStore('sqlite')
    const plainOutcomes = await play(plain, kyselyRunWriter(plain.db), calls, false)
    const alone = await tempStore('sqlite')
    const aloneWriter = sqliteRunWriter(alone.db, alone.sqlite!)
    const aloneOutcomes = await play(alone, aloneWriter, calls, false)
    await runCall(aloneWriter.close())
    // The sequence exercised what it is for: lost leases and broken keys among the commits.
    expect(plainOutcomes, `seed ${seed}`).toContain('lost')
    expect(plainOutcomes, `seed ${seed}`).toContain('failed')
    expect(threadedOutcomes, `seed ${seed}`).toEqual(plainOutcomes)
    expect(aloneOutcomes, `seed ${seed}`).toEqual(plainOutcomes)
    for (const [other, entrySteps] of [
      [plain, false],
      [alone, true]
    ] as const) {
      const threadedRows = dump(threaded, entrySteps)
      const otherRows = dump(other, entrySteps)
      expect(Object.keys(threadedRows), `seed ${seed}`).toEqual(Object.keys(otherRows))
      for (const table of Object.keys(otherRows)) expect(threadedRows[table], `seed ${seed}, table ${table}`).toEqual(otherRows[table])
    }
  })
})
