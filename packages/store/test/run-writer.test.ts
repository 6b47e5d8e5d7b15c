import { statSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import {
  acquireLease,
  rememberRule,
  kyselyRunWriter,
  LeaseLostError,
  listApprovals,
  listAttempts,
  listPolicyEvents,
  listSteps,
  listToolEffects,
  listTransitions,
  getRun,
  insertRun,
  insertStep,
  type AttemptTotals,
  type RunWriter,
  runAttemptTotals,
  postgresRunWriter,
  sqliteRunWriter,
  type Store,
  type TransitionCommit
} from '@agentvisor/store'
import { DIALECTS, SNAPSHOT, attempt, journalTransition, run, step, tempStore, type TestDialect } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

const never = () => false

/** Each writer the store has, on each dialect it runs on. */
const WRITERS: ReadonlyArray<readonly [string, TestDialect]> = [
  ...DIALECTS.map((d) => [`kysely on ${d}`, d] as const),
  ['prepared statements on sqlite', 'sqlite'],
  ['one statement a call on postgres', 'postgres']
]

const writerOf = (name: string, store: Store): RunWriter =>
  name.startsWith('prepared')
    ? sqliteRunWriter(store.db, store.sqlite!)
    : name.startsWith('one statement')
      ? postgresRunWriter(store.pool!)
      : kyselyRunWriter(store.db)

/** A tool result as a step records it. */
const RESULT = { toolCallId: 'c1', name: 'exec', ok: true, output: 'r' }

/** A policy refusal of run-1's step 1, as the driver records one. */
const refusal = (target: string) => ({
  run_id: 'run-1',
  step: 1,
  kind: 'refusal' as const,
  act: 'write' as const,
  target,
  rule: 'secrets/**',
  layer: 'base',
  decision: 'deny' as const,
  source: 'policy' as const,
  request_id: null,
  performed_target: null,
  at: 'x'
})

/** An approval request for run-1's step 1, call c1, still undecided. */
const approvalRequest = (target: string) => ({
  id: 'ap-1',
  run_id: 'run-1',
  step: 1,
  position: 0,
  tool_call_id: 'c1',
  kind: 'approval' as const,
  act: 'exec' as const,
  target,
  payload_json: '{"name":"exec","arguments":"{}"}',
  rule: '*',
  layer: 'team',
  source: null,
  edited_payload_json: null,
  created_at: 'x',
  decided_at: null
})

const head = (state: string, at = '2026-11-29T12:00:01.000Z') => ({ status: 'running', state, steps: 1, updated_at: at, error_json: null, ended_at: null })

const commitOf = (token: number, seq: number, overrides: Partial<TransitionCommit> = {}): TransitionCommit => ({
  runId: 'run-1',
  leaseToken: token,
  writes: [],
  transitions: [journalTransition({ seq })],
  snapshot: SNAPSHOT,
  head: head('acting'),
  ...overrides
})

describe.each(WRITERS)('the run writer (%s)', (name, dialect) => {
  const setup = async () => {
    const store = await tempStore(dialect)
    const writer = writerOf(name, store)
    const token = await runCall(writer.createRun(run(), { owner: 'me', expiresAt: 5000 }))
    return { store, writer, token, db: store.db }
  }

  it('creates a run with its contract, already leased with token 1', async () => {
    const { db, token } = await setup()
    expect(token).toBe(1)
    const row = await runCall(getRun(db, 'run-1'))
    expect(row).toMatchObject({ lease_owner: 'me', lease_expires_at: 5000, lease_token: 1 })
    expect(row!.contract).toMatchObject({ goal: 'Write DONE into out.txt' })
  })

  it("reads a workspace's remembered decisions oldest first, and none of another workspace's", async () => {
    const { db, writer } = await setup()
    const at = (s: number) => `2026-11-29T12:00:0${s}.000Z`
    await runCall(rememberRule(db, { workspace: '/ws', act: 'write', pattern: 'b.txt', decision: 'deny', run_id: 'run-1', created_at: at(2) }))
    await runCall(rememberRule(db, { workspace: '/ws', act: 'exec', pattern: 'npm test', decision: 'allow', run_id: 'run-1', created_at: at(1) }))
    await runCall(rememberRule(db, { workspace: '/other', act: 'write', pattern: 'a.txt', decision: 'allow', run_id: 'run-1', created_at: at(0) }))
    expect((await runCall(writer.rememberedRules('/ws'))).map((r) => [r.act, r.pattern, r.decision])).toEqual([
      ['exec', 'npm test', 'allow'],
      ['write', 'b.txt', 'deny']
    ])
    expect(await runCall(writer.rememberedRules('/nowhere'))).toEqual([])
  })

  it("reads a run's last step that answered with text as it was written, and nothing for a run without one", async () => {
    const { db, writer } = await setup()
    await runCall(insertRun(db, run({ id: 'run-2' })))
    const odd = 'last \u0000 \u0010 \ud800 answer'
    await runCall(insertStep(db, step({ step: 1, text: 'first' })))
    await runCall(insertStep(db, step({ step: 2, text: odd })))
    await runCall(insertStep(db, step({ step: 3, text: '' })))
    await runCall(insertStep(db, step({ run_id: 'run-2', step: 1, text: '' })))
    expect(await runCall(writer.lastStepText('run-1'))).toBe(odd)
    expect(await runCall(writer.lastStepText('run-2'))).toBeUndefined()
    expect(await runCall(writer.lastStepText('ghost'))).toBeUndefined()
  })

  it('commits transitions, their step data and the head in one transaction, in order', async () => {
    const { db, writer, token } = await setup()
    await runCall(writer.write('run-1', token, [{ op: 'insertAttempt', row: attempt() }]))
    await runCall(
      writer.commit(
        commitOf(token, 1, {
          writes: [
            { op: 'settleAttempt', runId: 'run-1', step: 1, attempt: 0, patch: { outcome: 'ok', settled_at: '2026-11-29T12:00:01.000Z', latency_ms: 5 } },
            { op: 'insertStep', row: step({ text: 'hi', tool_calls_json: '[]' }) },
            { op: 'setStepResults', runId: 'run-1', step: 1, resultsJson: JSON.stringify([RESULT]) },
            { op: 'setStepFeedback', runId: 'run-1', step: 1, feedback: 'keep going' },
            { op: 'insertPolicyEvents', rows: [refusal('secrets/a')] },
            { op: 'insertApproval', row: approvalRequest('ls') },
            { op: 'startToolEffect', row: { run_id: 'run-1', step: 1, position: 0, tool_call_id: 'c1', name: 'exec', arguments: '{}', started_at: 'x' } },
            { op: 'completeToolEffect', runId: 'run-1', step: 1, position: 0, resultJson: '{"ok":true,"output":"r"}', at: 'y' }
          ],
          transitions: [
            journalTransition({ seq: 1, to: 'acting' }),
            journalTransition({ seq: 2, from: 'acting', event: { type: 'TOOLS_DONE' }, to: 'verifying' })
          ],
          head: head('verifying')
        })
      )
    )
    expect((await runCall(listTransitions(db, 'run-1'))).map((t) => [t.seq, t.to_state])).toEqual([
      [1, 'acting'],
      [2, 'verifying']
    ])
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ state: 'verifying', steps: 1, updated_at: '2026-11-29T12:00:01.000Z' })
    expect(await runCall(listAttempts(db, 'run-1'))).toMatchObject([{ attempt: 0, outcome: 'ok', latency_ms: 5 }])
    expect(await runCall(listSteps(db, 'run-1'))).toMatchObject([{ text: 'hi', tool_calls: [], results: [RESULT], feedback: 'keep going' }])
    expect(await runCall(listPolicyEvents(db, 'run-1'))).toMatchObject([{ target: 'secrets/a', rule: 'secrets/**' }])
    expect(await runCall(listApprovals(db, 'run-1', 1))).toMatchObject([{ id: 'ap-1', status: 'pending' }])
    expect(await runCall(listToolEffects(db, 'run-1', 1))).toMatchObject([{ status: 'completed', result: { ok: true, output: 'r' } }])
    expect(await runCall(writer.approvals('run-1', 1))).toMatchObject([{ id: 'ap-1' }])
    expect(await runCall(writer.toolEffects('run-1', 1))).toMatchObject([{ position: 0, status: 'completed' }])
  })

  it('writes every receipt column it is given, and a settlement keeps what it leaves out, whatever the shape', async () => {
    const { db, writer, token } = await setup()
    const settledAt = '2026-11-29T12:00:01.000Z'
    await runCall(
      writer.commit(
        commitOf(token, 1, {
          writes: [
            // A receipt with nothing known yet, and one that already knows its tokens (a resumed call).
            { op: 'insertAttempt', row: attempt() },
            { op: 'insertAttempt', row: attempt({ attempt: 1, reason: 'retry', tokens_in: 7, partial_text: 'half' }) },
            { op: 'insertAttempt', row: attempt({ attempt: 2, reason: 'fallover' }) }
          ]
        })
      )
    )
    await runCall(
      writer.commit(
        commitOf(token, 2, {
          writes: [
            // An answer's settlement, one that keeps the tokens and the partial text it leaves out, and a failure's.
            { op: 'settleAttempt', runId: 'run-1', step: 1, attempt: 0, patch: { outcome: 'ok', settled_at: settledAt, latency_ms: 5, tokens_out: 3 } },
            { op: 'settleAttempt', runId: 'run-1', step: 1, attempt: 1, patch: { outcome: 'ok', settled_at: settledAt, latency_ms: 6 } },
            {
              op: 'settleAttempt',
              runId: 'run-1',
              step: 1,
              attempt: 2,
              patch: { outcome: 'failed', settled_at: settledAt, error_kind: 'transient', http_status: 503, error_message: 'busy', latency_ms: 1 }
            }
          ]
        })
      )
    )
    expect(await runCall(listAttempts(db, 'run-1'))).toMatchObject([
      { attempt: 0, reason: 'initial', outcome: 'ok', latency_ms: 5, tokens_in: null, tokens_out: 3, partial_text: null, error_kind: null },
      { attempt: 1, reason: 'retry', outcome: 'ok', latency_ms: 6, tokens_in: 7, tokens_out: null, partial_text: 'half', error_kind: null },
      { attempt: 2, reason: 'fallover', outcome: 'failed', error_kind: 'transient', http_status: 503, error_message: 'busy', latency_ms: 1 }
    ])
  })

  it("commits a step's transitions as one journal entry with one snapshot, and lists each of them", async () => {
    const { db, writer, token } = await setup()
    const snapshot = '{"v":1,"snapshot":{"value":"dispatching","context":{"step":2}}}'
    await runCall(
      writer.commit(
        commitOf(token, 3, {
          transitions: [
            journalTransition({ seq: 1, event: { type: 'PROVIDER_OK', hasToolCalls: true } }),
            journalTransition({ seq: 2, from: 'acting', event: { type: 'TOOLS_DONE' }, to: 'verifying' }),
            journalTransition({ seq: 3, from: 'verifying', event: { type: 'VERIFY_FAILED' }, to: 'dispatching' })
          ],
          snapshot,
          head: head('dispatching')
        })
      )
    )
    const entries = await db.selectFrom('journal_entries').selectAll().where('run_id', '=', 'run-1').execute()
    expect(entries).toHaveLength(1)
    expect(entries[0]).toMatchObject({ seq: 3, first_seq: 1, snapshot_json: snapshot })
    // The events are kept whole: the machine replays them for the snapshots before the last.
    expect(JSON.parse(entries[0]!.transitions_json)[0]).toEqual({
      seq: 1,
      from: 'dispatching',
      event: { type: 'PROVIDER_OK', hasToolCalls: true },
      to: 'acting',
      at: '2026-11-29T12:00:01.000Z'
    })
    expect(await runCall(listTransitions(db, 'run-1'))).toEqual([
      { run_id: 'run-1', seq: 1, from_state: 'dispatching', event: 'PROVIDER_OK', to_state: 'acting', snapshot_json: null, at: '2026-11-29T12:00:01.000Z' },
      { run_id: 'run-1', seq: 2, from_state: 'acting', event: 'TOOLS_DONE', to_state: 'verifying', snapshot_json: null, at: '2026-11-29T12:00:01.000Z' },
      {
        run_id: 'run-1',
        seq: 3,
        from_state: 'verifying',
        event: 'VERIFY_FAILED',
        to_state: 'dispatching',
        snapshot_json: snapshot,
        at: '2026-11-29T12:00:01.000Z'
      }
    ])
    expect((await runCall(writer.loadRun('run-1')))?.last).toEqual({ seq: 3, snapshot_json: snapshot })
  })

  it('writes nothing for a driver whose lease was taken over', async () => {
    const { db, writer, token } = await setup()
    expect(await runCall(acquireLease(db, { runId: 'run-1', owner: 'other', now: 9000, ttlMs: 500, isAbandoned: never }))).toEqual({ token: 2 })
    await expect(
      Promise.resolve().then(() => runCall(writer.commit(commitOf(token, 1, { writes: [{ op: 'insertStep', row: step() }] }))))
    ).rejects.toBeInstanceOf(LeaseLostError)
    await expect(Promise.resolve().then(() => runCall(writer.write('run-1', token, [{ op: 'insertAttempt', row: attempt() }])))).rejects.toBeInstanceOf(
      LeaseLostError
    )
    await expect(Promise.resolve().then(() => runCall(writer.settlePending('run-1', token, 'unknown', 'x')))).rejects.toBeInstanceOf(LeaseLostError)
    expect(await runCall(listTransitions(db, 'run-1'))).toEqual([])
    expect(await runCall(listSteps(db, 'run-1'))).toEqual([])
    expect(await runCall(listAttempts(db, 'run-1'))).toEqual([])
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ state: 'dispatching', lease_owner: 'other' })
  })

  it("leaves the run's row for a later refresh when a commit defers its head, still fenced, and refreshes it without the status", async () => {
    const { db, writer, token } = await setup()
    // A writer without `refreshHead` writes the head at every commit (and is never handed a deferred one).
    if (writer.refreshHead === undefined) return expect(name).not.toBe('prepared statements on sqlite')
    await runCall(writer.commit(commitOf(token, 1, { head: head('acting'), writes: [{ op: 'insertStep', row: step() }] })))
    const deferred = { ...head('verifying', '2026-11-29T12:00:02.000Z'), status: undefined, steps: 2 }
    await runCall(
      writer.commit(commitOf(token, 2, { head: deferred, headDeferred: true, transitions: [journalTransition({ seq: 2, from: 'acting', to: 'verifying' })] }))
    )
    // The journal has the transition; the row is as the first commit left it.
    expect((await runCall(listTransitions(db, 'run-1'))).map((t) => t.to_state)).toEqual(['acting', 'verifying'])
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ status: 'running', state: 'acting', steps: 1, updated_at: '2026-11-29T12:00:01.000Z' })
    await runCall(writer.refreshHead('run-1', token, { ...deferred, status: 'succeeded' }))
    // The refresh writes the head's columns and never the status (a status change is a commit's).
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ status: 'running', state: 'verifying', steps: 2, updated_at: '2026-11-29T12:00:02.000Z' })
    // Both stay fenced: a superseded driver's deferred commit and refresh write nothing.
    expect(await runCall(acquireLease(db, { runId: 'run-1', owner: 'other', now: 9000, ttlMs: 500, isAbandoned: never }))).toEqual({ token: 2 })
    const superseded = commitOf(token, 3, { head: deferred, headDeferred: true, writes: [{ op: 'insertStep', row: step({ step: 3 }) }] })
    await expect(Promise.resolve().then(() => runCall(writer.commit(superseded)))).rejects.toBeInstanceOf(LeaseLostError)
    await expect(Promise.resolve().then(() => runCall(writer.refreshHead!('run-1', token, head('acting', 'z'))))).rejects.toBeInstanceOf(LeaseLostError)
    expect((await runCall(listTransitions(db, 'run-1'))).map((t) => t.seq)).toEqual([1, 2])
    expect((await runCall(listSteps(db, 'run-1'))).map((s) => s.step)).toEqual([1])
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ state: 'verifying', updated_at: '2026-11-29T12:00:02.000Z' })
  })

  it('loads what a resume restores and tells whether an attempt was recorded', async () => {
    const { writer, token } = await setup()
    await runCall(writer.write('run-1', token, [{ op: 'insertAttempt', row: attempt() }]))
    await runCall(writer.commit(commitOf(token, 1, { writes: [{ op: 'insertStep', row: step() }] })))
    await runCall(
      writer.commit(commitOf(token, 2, { transitions: [journalTransition({ seq: 2, to: 'verifying' })], snapshot: '{"v":1,"snapshot":{"value":"verifying"}}' }))
    )
    const loaded = await runCall(writer.loadRun('run-1'))
    expect(loaded?.last).toEqual({ seq: 2, snapshot_json: '{"v":1,"snapshot":{"value":"verifying"}}' })
    expect(loaded?.steps.map((s) => s.step)).toEqual([1])
    expect(loaded!.run.contract).toMatchObject({ goal: 'Write DONE into out.txt' })
    expect(await runCall(writer.loadRun('missing'))).toBeUndefined()
    expect(await runCall(writer.attemptRecorded('run-1', 1, 0))).toBe(true)
    expect(await runCall(writer.attemptRecorded('run-1', 1, 1))).toBe(false)
    expect(await runCall(writer.settlePending('run-1', token, 'unknown', 'z'))).toBe(1)
    expect(await runCall(writer.settlePending('run-1', token, 'unknown', 'z'))).toBe(0)
  })

  it("reads an answered receipt settled by its step's commit, which recovery and a later settlement leave as it is", async () => {
    const { db, writer, token } = await setup()
    const at = '2026-11-29T12:00:01.000Z'
    await runCall(
      writer.write('run-1', token, [
        { op: 'insertAttempt', row: attempt({ tokens_in: 9, partial_text: 'kept' }) },
        { op: 'insertAttempt', row: attempt({ attempt: 1, reason: 'retry' }) }
      ])
    )
    // The step's commit as the driver makes it: the answer's settlement, its step, the next receipt.
    await runCall(
      writer.commit(
        commitOf(token, 1, {
          writes: [
            { op: 'settleAttempt', runId: 'run-1', step: 1, attempt: 1, patch: { outcome: 'ok', settled_at: at, latency_ms: 12, ttft_ms: 4, tokens_out: 7 } },
            { op: 'insertStep', row: step({ tokens_in: 0, tokens_out: 7 }) },
            { op: 'insertAttempt', row: attempt({ step: 2 }) }
          ]
        })
      )
    )
    const answered = { step: 1, attempt: 1, outcome: 'ok', settled_at: at, latency_ms: 12, ttft_ms: 4, tokens_in: null, tokens_out: 7, partial_text: null }
    const receipts = async () =>
      (await runCall(listAttempts(db, 'run-1'))).map(({ step, attempt, outcome, settled_at, latency_ms, ttft_ms, tokens_in, tokens_out, partial_text }) => ({
        step,
        attempt,
        outcome,
        settled_at,
        latency_ms,
        ttft_ms,
        tokens_in,
        tokens_out,
        partial_text
      }))
    const pendingOf = (step: number, attempt: number, more: object = {}) => ({
      step,
      attempt,
      outcome: 'pending',
      settled_at: null,
      latency_ms: null,
      ttft_ms: null,
      tokens_in: null,
      tokens_out: null,
      partial_text: null,
      ...more
    })
    expect(await receipts()).toEqual([pendingOf(1, 0, { tokens_in: 9, partial_text: 'kept' }), answered, pendingOf(2, 0)])
    // Recovery settles the two receipts still pending, never the answered one; a late settlement of it changes nothing.
    expect(await runCall(writer.settlePending('run-1', token, 'unknown', 'z'))).toBe(2)
    await runCall(
      writer.write('run-1', token, [{ op: 'settleAttempt', runId: 'run-1', step: 1, attempt: 1, patch: { outcome: 'failed', settled_at: 'late' } }])
    )
    expect(await receipts()).toEqual([
      { ...pendingOf(1, 0, { tokens_in: 9, partial_text: 'kept' }), outcome: 'unknown', settled_at: 'z' },
      answered,
      { ...pendingOf(2, 0), outcome: 'unknown', settled_at: 'z' }
    ])
    expect(await runCall(writer.attemptRecorded('run-1', 1, 1))).toBe(true)
    expect(await runCall(writer.attemptTotals('run-1'))).toEqual(await runCall(runAttemptTotals(db, 'run-1')))
    expect((await runCall(writer.attemptTotals('run-1'))).find((t) => t.outcome === 'ok')).toMatchObject({ tokensIn: 0, tokensOut: 7, attempts: 1 })
  })

  it("sums a run's receipts by provider and outcome exactly as runAttemptTotals does, and no other run's", async () => {
    const { db, writer, token } = await setup()
    await runCall(
      writer.write('run-1', token, [
        { op: 'insertAttempt', row: attempt() },
        { op: 'settleAttempt', runId: 'run-1', step: 1, attempt: 0, patch: { outcome: 'failed', settled_at: 'b', error_kind: 'transient', tokens_in: 3 } },
        { op: 'insertAttempt', row: attempt({ attempt: 1, provider: 'backup', reason: 'fallover' }) },
        { op: 'settleAttempt', runId: 'run-1', step: 1, attempt: 1, patch: { outcome: 'ok', settled_at: 'c', tokens_in: 100, tokens_out: 20 } },
        { op: 'insertAttempt', row: attempt({ step: 2, attempt: 0, provider: 'backup' }) },
        { op: 'settleAttempt', runId: 'run-1', step: 2, attempt: 0, patch: { outcome: 'ok', settled_at: 'd', tokens_in: 50, tokens_out: 5 } },
        { op: 'insertAttempt', row: attempt({ step: 3, attempt: 0 }) }
      ])
    )
    const other = await runCall(writer.createRun(run({ id: 'run-2' }), { owner: 'me', expiresAt: 5000 }))
    await runCall(writer.write('run-2', other, [{ op: 'insertAttempt', row: attempt({ run_id: 'run-2' }) }]))
    const byKey = (totals: ReadonlyArray<AttemptTotals>) => [...totals].sort((a, b) => `${a.provider}/${a.outcome}`.localeCompare(`${b.provider}/${b.outcome}`))
    const totals = byKey(await runCall(writer.attemptTotals('run-1')))
    expect(totals).toEqual([
      { runId: 'run-1', provider: 'backup', outcome: 'ok', tokensIn: 150, tokensOut: 25, attempts: 2 },
      { runId: 'run-1', provider: 'primary', outcome: 'failed', tokensIn: 3, tokensOut: 0, attempts: 1 },
      { runId: 'run-1', provider: 'primary', outcome: 'pending', tokensIn: 0, tokensOut: 0, attempts: 1 }
    ])
    expect(totals).toEqual(byKey(await runCall(runAttemptTotals(db, 'run-1'))))
    expect(await runCall(writer.attemptTotals('missing'))).toEqual([])
  })

  it('takes and releases leases like acquireLease and releaseLease', async () => {
    const { db, writer } = await setup()
    expect(await runCall(writer.acquireLease({ runId: 'run-1', owner: 'b', now: 1000, ttlMs: 500, isAbandoned: never }))).toEqual({
      holder: { owner: 'me', expiresAt: 5000 }
    })
    expect(await runCall(writer.acquireLease({ runId: 'run-1', owner: 'b', now: 1000, ttlMs: 500, isAbandoned: (o) => o === 'me' }))).toEqual({ token: 2 })
    expect(await runCall(writer.acquireLease({ runId: 'missing', owner: 'b', now: 1000, ttlMs: 500, isAbandoned: never }))).toBeUndefined()
    await runCall(writer.releaseLease('run-1', 1)) // a stale token releases nothing
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ lease_owner: 'b', lease_token: 2 })
    await runCall(writer.releaseLease('run-1', 2))
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ lease_owner: null, lease_expires_at: null, lease_token: 2 })
  })

  it('group-commits several runs in one batch, where a fenced-out run rolls back alone', async () => {
    const { db, writer } = await setup()
    const other = await runCall(writer.createRun(run({ id: 'run-2' }), { owner: 'me', expiresAt: 5000 }))
    const stale = await runCall(writer.createRun(run({ id: 'run-3' }), { owner: 'me', expiresAt: 5000 }))
    await runCall(acquireLease(db, { runId: 'run-3', owner: 'thief', now: 9000, ttlMs: 500, isAbandoned: never }))
    const results = await Promise.allSettled([
      runCall(writer.commit(commitOf(1, 1, { writes: [{ op: 'insertStep', row: step() }] }), { batch: true })),
      runCall(writer.commit(commitOf(other, 1, { runId: 'run-2', transitions: [journalTransition({ seq: 1 })] }), { batch: true })),
      runCall(
        writer.commit(
          commitOf(stale, 1, {
            runId: 'run-3',
            writes: [{ op: 'insertStep', row: step({ run_id: 'run-3' }) }],
            transitions: [journalTransition({ seq: 1 })]
          }),
          { batch: true }
        )
      )
    ])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected'])
    expect((results[2] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError)
    expect(await runCall(listTransitions(db, 'run-1'))).toHaveLength(1)
    expect(await runCall(listSteps(db, 'run-1'))).toHaveLength(1)
    expect(await runCall(listTransitions(db, 'run-2'))).toHaveLength(1)
    expect(await runCall(listTransitions(db, 'run-3'))).toEqual([])
    expect(await runCall(listSteps(db, 'run-3'))).toEqual([])
  })

  it("creates runs inside a group commit with other runs' commits, where a run whose id is taken fails alone", async () => {
    const { db, writer } = await setup()
    const results = await Promise.allSettled([
      runCall(writer.createRun(run({ id: 'run-2', goal: 'second' }), { owner: 'me', expiresAt: 5000 }, { batch: true })),
      runCall(writer.commit(commitOf(1, 1, { writes: [{ op: 'insertStep', row: step() }] }), { batch: true })),
      // run-1 exists already: its id is taken.
      runCall(writer.createRun(run({ goal: 'a twin' }), { owner: 'me', expiresAt: 5000 }, { batch: true })),
      runCall(writer.createRun(run({ id: 'run-3' }), { owner: 'other', expiresAt: 7000 }, { batch: true }))
    ])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled'])
    expect((results[0] as PromiseFulfilledResult<number>).value).toBe(1)
    expect(await runCall(getRun(db, 'run-2'))).toMatchObject({ goal: 'second', lease_owner: 'me', lease_expires_at: 5000, lease_token: 1, status: 'running' })
    expect(await runCall(getRun(db, 'run-3'))).toMatchObject({ lease_owner: 'other', lease_expires_at: 7000, lease_token: 1 })
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ goal: 'Write DONE into out.txt', state: 'acting' })
    expect(await runCall(listSteps(db, 'run-1'))).toHaveLength(1)
    // A run created in a group commit is driven like any other: its token fences its commits.
    await runCall(writer.commit(commitOf(1, 1, { runId: 'run-2', writes: [{ op: 'insertStep', row: step({ run_id: 'run-2' }) }] })))
    expect(await runCall(listTransitions(db, 'run-2'))).toHaveLength(1)
  })

  it('rolls back alone a fenced-out run of a group commit that leaves its head for later', async () => {
    const { db, writer } = await setup()
    const stale = await runCall(writer.createRun(run({ id: 'run-3' }), { owner: 'me', expiresAt: 5000 }))
    await runCall(acquireLease(db, { runId: 'run-3', owner: 'thief', now: 9000, ttlMs: 500, isAbandoned: never }))
    const later = { ...head('verifying'), status: undefined }
    const results = await Promise.allSettled([
      runCall(writer.commit(commitOf(1, 1, { writes: [{ op: 'insertStep', row: step() }] }), { batch: true })),
      runCall(
        writer.commit(commitOf(stale, 1, { runId: 'run-3', head: later, headDeferred: true, writes: [{ op: 'insertStep', row: step({ run_id: 'run-3' }) }] }), {
          batch: true
        })
      )
    ])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected'])
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError)
    expect(await runCall(listSteps(db, 'run-1'))).toHaveLength(1)
    expect(await runCall(listTransitions(db, 'run-3'))).toEqual([])
    expect(await runCall(listSteps(db, 'run-3'))).toEqual([])
  })

  it('rolls back alone a run of a group commit whose write fails after its head was updated, and commits the others', async () => {
    const { db, writer, token } = await setup()
    const other = await runCall(writer.createRun(run({ id: 'run-2' }), { owner: 'me', expiresAt: 5000 }))
    await runCall(writer.commit(commitOf(token, 1, { writes: [{ op: 'insertStep', row: step() }] })))
    // Its head update passes the fence; its second insert of step 1 then breaks the step's key.
    const results = await Promise.allSettled([
      runCall(writer.commit(commitOf(token, 2, { head: head('verifying'), writes: [{ op: 'insertStep', row: step({ text: 'again' }) }] }), { batch: true })),
      runCall(writer.commit(commitOf(other, 1, { runId: 'run-2', writes: [{ op: 'insertStep', row: step({ run_id: 'run-2' }) }] }), { batch: true }))
    ])
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled'])
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ state: 'acting' })
    expect(await runCall(listTransitions(db, 'run-1'))).toHaveLength(1)
    expect(await runCall(getRun(db, 'run-2'))).toMatchObject({ state: 'acting' })
    expect(await runCall(listSteps(db, 'run-2'))).toHaveLength(1)
    expect(await runCall(listTransitions(db, 'run-2'))).toHaveLength(1)
  })

  it('waits for a Kysely transaction in flight instead of writing inside it', async () => {
    const { db, writer, token } = await setup()
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    // A Kysely transaction held open across an await, then rolled back.
    const rolledBack = db
      .transaction()
      .execute(async (trx) => {
        await trx.updateTable('runs').set({ goal: 'changed' }).where('id', '=', 'run-1').execute()
        await held
        throw new Error('roll back')
      })
      .catch(() => undefined)
    await new Promise((r) => setTimeout(r, 20))
    const committed = Promise.resolve(runCall(writer.commit(commitOf(token, 1))))
    release()
    await rolledBack
    await committed
    // The writer's commit survived the other transaction's rollback: it was not inside it.
    expect(await runCall(listTransitions(db, 'run-1'))).toHaveLength(1)
    expect(await runCall(getRun(db, 'run-1'))).toMatchObject({ goal: 'Write DONE into out.txt', state: 'acting' })
  })
})

describe('the SQLite checkpointer', () => {
  it('copies committed pages into the database file from its own thread, and stops with the writer', async () => {
    const store = await tempStore('sqlite')
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    const token = await runCall(writer.createRun(run(), { owner: 'me', expiresAt: 5000 }))
    // The writer's own connection no longer checkpoints on commit.
    expect(store.sqlite!.pragma('wal_autocheckpoint', { simple: true })).toBe(0)
    const before = statSync(store.file).size
    for (let seq = 1; seq <= 300; seq++) runCall(writer.commit(commitOf(token, seq, { snapshot: 'x'.repeat(2000) })))
    const deadline = Date.now() + 10_000
    while (statSync(store.file).size <= before + 300 * 1000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(statSync(store.file).size).toBeGreaterThan(before + 300 * 1000)
    await runCall(writer.close())
    expect(store.sqlite!.pragma('wal_autocheckpoint', { simple: true })).toBe(1000)
  })
})

describe('the SQLite commit thread', () => {
  /** `n` runs created by `writer`, each leased with token 1. */
  const runsOf = async (writer: RunWriter, n: number): Promise<string[]> => {
    const ids = Array.from({ length: n }, (_, i) => `run-${i + 1}`)
    for (const id of ids) await runCall(writer.createRun(run({ id }), { owner: 'me', expiresAt: 5000 }))
    return ids
  }
  /** Each run's first commit: its step 1 and one transition, in a group commit. */
  const firstCommits = (writer: RunWriter, ids: ReadonlyArray<string>) =>
    ids.map((id) =>
      Promise.resolve(runCall(writer.commit(commitOf(1, 1, { runId: id, writes: [{ op: 'insertStep', row: step({ run_id: id }) }] }), { batch: true })))
    )
  // SQLite's `data_version` on a connection changes when another connection commits, never for its own.
  const dataVersion = (store: Store): number => store.sqlite!.pragma('data_version', { simple: true }) as number

  it("commits a large group commit on its own connection, every run's rows in the store", async () => {
    const store = await tempStore('sqlite')
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    const ids = await runsOf(writer, 24)
    const before = dataVersion(store)
    await Promise.all(firstCommits(writer, ids))
    expect(dataVersion(store)).not.toBe(before)
    for (const id of ids) {
      expect(await runCall(listSteps(store.db, id))).toHaveLength(1)
      expect(await runCall(listTransitions(store.db, id))).toHaveLength(1)
      expect(await runCall(getRun(store.db, id))).toMatchObject({ state: 'acting' })
    }
    await runCall(writer.close())
  })

  it("makes every kind of write a commit carries exactly as the store's connection makes it, text that needs escaping included", async () => {
    // Run-1's two commits, every write kind in them: an errored receipt with its partial text, a
    // pending one, both settlement shapes, a step and its results, feedback on an earlier step,
    // policy events, an approval, a tool effect started and completed; text with NUL and DLE.
    const odd = 'a\u0000b\u0010c'
    const commits = (): TransitionCommit[] => [
      commitOf(1, 1, {
        writes: [
          {
            op: 'insertAttempt',
            row: attempt({ attempt: 0, error_kind: 'transient', http_status: 503, error_message: odd, partial_text: odd, latency_ms: 3 })
          },
          {
            op: 'settleAttempt',
            runId: 'run-1',
            step: 1,
            attempt: 0,
            patch: { outcome: 'failed', settled_at: 's0', error_kind: 'transient', http_status: 503 }
          },
          { op: 'insertAttempt', row: attempt({ attempt: 1 }) },
          { op: 'settleAttempt', runId: 'run-1', step: 1, attempt: 1, patch: { outcome: 'ok', settled_at: 's1', latency_ms: 7, tokens_in: 2, tokens_out: 3 } },
          { op: 'insertStep', row: step({ text: odd, tool_calls_json: '[]' }) }
        ]
      }),
      commitOf(1, 2, {
        head: head('verifying'),
        writes: [
          { op: 'setStepResults', runId: 'run-1', step: 1, resultsJson: JSON.stringify([{ ...RESULT, output: odd }]) },
          { op: 'setStepFeedback', runId: 'run-1', step: 1, feedback: odd },
          { op: 'insertPolicyEvents', rows: [refusal(odd)] },
          { op: 'insertApproval', row: approvalRequest(odd) },
          { op: 'startToolEffect', row: { run_id: 'run-1', step: 1, position: 0, tool_call_id: 'c1', name: 'exec', arguments: odd, started_at: 'x' } },
          { op: 'completeToolEffect', runId: 'run-1', step: 1, position: 0, resultJson: '{"ok":true,"output":"r"}', at: odd }
        ],
        transitions: [journalTransition({ seq: 2, from: 'acting', event: { type: 'TOOLS_DONE' }, to: 'verifying' })]
      })
    ]
    const rowsOf = async (store: Store) => ({
      run: await runCall(getRun(store.db, 'run-1')),
      attempts: await runCall(listAttempts(store.db, 'run-1')),
      steps: await runCall(listSteps(store.db, 'run-1')),
      transitions: await runCall(listTransitions(store.db, 'run-1')),
      policy: await runCall(listPolicyEvents(store.db, 'run-1')),
      approvals: await runCall(listApprovals(store.db, 'run-1', 1)),
      effects: await runCall(listToolEffects(store.db, 'run-1', 1))
    })
    // On the store's connection, one commit at a time.
    const alone = await tempStore('sqlite')
    const mainWriter = sqliteRunWriter(alone.db, alone.sqlite!)
    await runsOf(mainWriter, 1)
    for (const commit of commits()) await runCall(mainWriter.commit(commit))
    // At the commit thread: each of run-1's commits in a group commit large enough to go there.
    const store = await tempStore('sqlite')
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    const ids = await runsOf(writer, 24)
    const [first, second] = commits()
    await Promise.all([runCall(writer.commit(first!, { batch: true })), ...firstCommits(writer, ids.slice(1))])
    const before = dataVersion(store)
    await Promise.all([
      runCall(writer.commit(second!, { batch: true })),
      ...ids.slice(1).map((id) => runCall(writer.commit(commitOf(1, 2, { runId: id, head: head('verifying') }), { batch: true })))
    ])
    expect(dataVersion(store)).not.toBe(before)
    const threaded = await rowsOf(store)
    expect(threaded).toEqual(await rowsOf(alone))
    expect(threaded.attempts).toMatchObject([
      { attempt: 0, outcome: 'failed', error_message: odd, partial_text: odd, http_status: 503 },
      { attempt: 1, outcome: 'ok', latency_ms: 7, tokens_in: 2, tokens_out: 3 }
    ])
    expect(threaded.steps).toMatchObject([{ text: odd, feedback: odd, results: [{ output: odd }] }])
    expect(threaded.effects).toMatchObject([{ status: 'completed', arguments: odd, completed_at: odd }])
    await runCall(writer.close())
    await runCall(mainWriter.close())
  })

  /** `ids.length` runs created at once, each allowed to join a group commit. */
  const createdAtOnce = (writer: RunWriter, ids: ReadonlyArray<string>) =>
    Promise.allSettled(ids.map((id) => runCall(writer.createRun(run({ id, goal: id }), { owner: 'me', expiresAt: 5000 }, { batch: true }))))

  it('creates runs there once it runs, in one group commit, with a taken id failing alone', async () => {
    const store = await tempStore('sqlite')
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    // Started by a group commit of transitions.
    await Promise.all(firstCommits(writer, await runsOf(writer, 24)))
    const before = dataVersion(store)
    // run-1 exists already: its id is taken.
    const ids = ['run-1', ...Array.from({ length: 23 }, (_, i) => `new-${i + 1}`)]
    const results = await createdAtOnce(writer, ids)
    // Made on the thread's own connection, not this one.
    expect(dataVersion(store)).not.toBe(before)
    expect((results[0] as PromiseRejectedResult).reason).toMatchObject({ cause: { code: 'SQLITE_CONSTRAINT_PRIMARYKEY' } })
    expect(results.slice(1).map((r) => (r as PromiseFulfilledResult<number>).value)).toEqual(ids.slice(1).map(() => 1))
    for (const id of ids.slice(1)) expect(await runCall(getRun(store.db, id))).toMatchObject({ goal: id, lease_owner: 'me', lease_token: 1, status: 'running' })
    expect(await runCall(getRun(store.db, 'run-1'))).toMatchObject({ goal: 'Write DONE into out.txt' })
    await runCall(writer.close())
  })

  it("is never started by runs' creations alone: they make their group commit on the store's connection", async () => {
    const store = await tempStore('sqlite')
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    const before = dataVersion(store)
    const ids = Array.from({ length: 100 }, (_, i) => `run-${i + 1}`)
    const results = await createdAtOnce(writer, ids)
    expect(results.every((r) => r.status === 'fulfilled')).toBe(true)
    for (const id of ids) expect(await runCall(getRun(store.db, id))).toMatchObject({ goal: id, lease_token: 1 })
    // No other connection committed: no thread was started for them.
    expect(dataVersion(store)).toBe(before)
    await runCall(writer.close())
  })

  it('fails there a fenced-out commit alone, as LeaseLostError, and one that breaks a key alone, with its SQLite code', async () => {
    const store = await tempStore('sqlite')
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    const ids = await runsOf(writer, 24)
    await runCall(acquireLease(store.db, { runId: 'run-3', owner: 'thief', now: 9000, ttlMs: 500, isAbandoned: never }))
    await runCall(writer.commit(commitOf(1, 1, { runId: 'run-5', writes: [{ op: 'insertStep', row: step({ run_id: 'run-5' }) }] })))
    const before = dataVersion(store)
    const results = await Promise.allSettled(
      ids.map((id) =>
        // run-5's step 1 is in the store already: inserting it again breaks the step's key.
        runCall(writer.commit(commitOf(1, id === 'run-5' ? 2 : 1, { runId: id, writes: [{ op: 'insertStep', row: step({ run_id: id }) }] }), { batch: true }))
      )
    )
    expect(dataVersion(store)).not.toBe(before)
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(2)
    expect((results[2] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError)
    expect((results[2] as PromiseRejectedResult).reason).toMatchObject({ runId: 'run-3' })
    expect((results[4] as PromiseRejectedResult).reason).toMatchObject({ cause: { code: 'SQLITE_CONSTRAINT_UNIQUE' } })
    expect(await runCall(listTransitions(store.db, 'run-3'))).toEqual([])
    expect(await runCall(listTransitions(store.db, 'run-5'))).toHaveLength(1)
    for (const id of ids.filter((id) => id !== 'run-3' && id !== 'run-5')) expect(await runCall(listTransitions(store.db, id))).toHaveLength(1)
    await runCall(writer.close())
  })

  it("holds the writer's other writes until the thread is done with what it has, then makes them", async () => {
    const store = await tempStore('sqlite')
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    const ids = await runsOf(writer, 24)
    const settled: string[] = []
    const commits = firstCommits(writer, ids).map((p, i) => p.then(() => settled.push(`commit ${i + 1}`)))
    // A turn later the batch is at the thread: a fenced write then waits for it.
    await new Promise((r) => setImmediate(r))
    const written = Promise.resolve(runCall(writer.write('run-1', 1, [{ op: 'insertAttempt', row: attempt({ step: 2 }) }]))).then(() => settled.push('write'))
    await Promise.all([...commits, written])
    expect(settled.at(-1)).toBe('write')
    expect(settled).toHaveLength(25)
    expect((await runCall(listAttempts(store.db, 'run-1'))).map((a) => a.step)).toEqual([2])
    await runCall(writer.close())
  })

  it('settles what it has before the writer closes', async () => {
    const store = await tempStore('sqlite')
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    const ids = await runsOf(writer, 24)
    const before = dataVersion(store)
    const commits = firstCommits(writer, ids)
    await new Promise((r) => setImmediate(r))
    await runCall(writer.close())
    expect((await Promise.allSettled(commits)).map((r) => r.status)).toEqual(ids.map(() => 'fulfilled'))
    expect(dataVersion(store)).not.toBe(before)
    for (const id of ids) expect(await runCall(listTransitions(store.db, id))).toHaveLength(1)
  })
})

describe('the SQLite run writer, with a Kysely transaction open', () => {
  it('reads the last text only once the transaction holding the connection has ended', async () => {
    const store = await tempStore('sqlite')
    const { db } = store
    await runCall(insertRun(db, run()))
    await runCall(insertStep(db, step({ step: 1, text: 'before' })))
    const writer = sqliteRunWriter(db, store.sqlite!)
    let pending: Promise<string | undefined> | undefined
    await db.transaction().execute(async (trx) => {
      pending = Promise.resolve(runCall(writer.lastStepText('run-1')))
      await runCall(insertStep(trx, step({ step: 2, text: 'inside the transaction' })))
    })
    expect(await pending).toBe('inside the transaction')
    await runCall(writer.close())
  })
})

describe('the PostgreSQL run writer', () => {
  it('sends each commit, each fenced write and each read to the server as one statement', async () => {
    const store = await tempStore('postgres')
    const pool = store.pool!
    const sent: string[] = []
    const query = pool.query.bind(pool) as (config: unknown) => Promise<unknown>
    // Every statement the writer sends, as `pg` is asked for it (a transaction would show as BEGIN, ..., COMMIT).
    ;(pool as unknown as { query: (config: unknown) => Promise<unknown> }).query = (config) => {
      sent.push(typeof config === 'string' ? config : (config as { text: string }).text)
      return query(config)
    }
    const writer = postgresRunWriter(pool)
    const token = await runCall(writer.createRun(run(), { owner: 'me', expiresAt: 5000 }))
    await runCall(writer.write('run-1', token, [{ op: 'insertAttempt', row: attempt() }]))
    await runCall(
      writer.commit(
        commitOf(token, 1, {
          writes: [
            { op: 'settleAttempt', runId: 'run-1', step: 1, attempt: 0, patch: { outcome: 'ok', settled_at: '2026-11-29T12:00:01.000Z' } },
            { op: 'insertStep', row: step() },
            { op: 'insertPolicyEvents', rows: [] },
            { op: 'setStepResults', runId: 'run-1', step: 1, resultsJson: JSON.stringify([RESULT]) },
            { op: 'insertAttempt', row: attempt({ step: 2 }) }
          ],
          transitions: [
            journalTransition({ seq: 1 }),
            journalTransition({ seq: 2, from: 'acting', to: 'verifying' }),
            journalTransition({ seq: 3, to: 'dispatching' })
          ]
        })
      )
    )
    expect(sent).toHaveLength(3)
    expect(sent.every((text) => !/^\s*(begin|commit)/i.test(text))).toBe(true)
    sent.length = 0
    const loaded = await runCall(writer.loadRun('run-1'))
    expect(loaded?.last?.seq).toBe(3)
    expect(loaded?.steps).toHaveLength(1)
    expect(sent).toHaveLength(1)
    expect(await runCall(listAttempts(store.db, 'run-1'))).toMatchObject([
      { step: 1, outcome: 'ok' },
      { step: 2, outcome: 'pending' }
    ])
    // A step's results set with its insert land in it; feedback set by a later commit too.
    await runCall(
      writer.commit(
        commitOf(token, 4, { writes: [{ op: 'setStepFeedback', runId: 'run-1', step: 1, feedback: 'not yet' }], transitions: [journalTransition({ seq: 4 })] })
      )
    )
    expect(await runCall(listSteps(store.db, 'run-1'))).toMatchObject([{ step: 1, results: [RESULT], feedback: 'not yet' }])
  })

  it("writes a step's commit as plain rows: the receipt settled in place, the step, the next receipt, the entry", async () => {
    const store = await tempStore('postgres')
    const pool = store.pool!
    const writer = postgresRunWriter(pool)
    const token = await runCall(writer.createRun(run(), { owner: 'me', expiresAt: 5000 }))
    await runCall(writer.write('run-1', token, [{ op: 'insertAttempt', row: attempt() }]))
    const answer = { outcome: 'ok', settled_at: '2026-11-29T12:00:01.000Z', latency_ms: 12, tokens_in: 30, tokens_out: 7 } as const
    const stepCommit = (seq: number, headDeferred: boolean, stepNo: number): TransitionCommit =>
      commitOf(token, seq, {
        headDeferred,
        writes: [
          { op: 'settleAttempt', runId: 'run-1', step: stepNo, attempt: 0, patch: answer },
          { op: 'insertStep', row: step({ step: stepNo, tokens_in: 30, tokens_out: 7 }) },
          { op: 'insertAttempt', row: attempt({ step: stepNo + 1, started_at: `s${stepNo + 1}` }) }
        ]
      })
    await runCall(writer.commit(stepCommit(1, false, 1)))
    await runCall(writer.commit(stepCommit(2, true, 2)))
    // A failure settles the next receipt in its row too.
    await runCall(
      writer.commit(
        commitOf(token, 3, {
          writes: [{ op: 'settleAttempt', runId: 'run-1', step: 3, attempt: 0, patch: { outcome: 'failed', settled_at: 'f', error_kind: 'transient' } }]
        })
      )
    )
    const rows = async (text: string) => (await pool.query(text)).rows
    expect(await rows('select step, attempt, outcome, settled_at, tokens_out from attempts order by step, attempt')).toEqual([
      { step: 1, attempt: 0, outcome: 'ok', settled_at: answer.settled_at, tokens_out: 7 },
      { step: 2, attempt: 0, outcome: 'ok', settled_at: answer.settled_at, tokens_out: 7 },
      { step: 3, attempt: 0, outcome: 'failed', settled_at: 'f', tokens_out: null }
    ])
    expect(await rows('select seq from journal_entries order by seq')).toEqual([{ seq: 1 }, { seq: 2 }, { seq: 3 }])
    // No view, no INSTEAD OF trigger: the three are tables.
    expect(await rows("select relname, relkind from pg_class where relname in ('attempts', 'steps', 'journal_entries') order by relname")).toEqual([
      { relname: 'attempts', relkind: 'r' },
      { relname: 'journal_entries', relkind: 'r' },
      { relname: 'steps', relkind: 'r' }
    ])
    // Read as the tables read before.
    expect(
      (await runCall(listAttempts(store.db, 'run-1'))).map((a) => [a.step, a.outcome, a.settled_at, a.latency_ms, a.tokens_in, a.tokens_out, a.started_at])
    ).toEqual([
      [1, 'ok', answer.settled_at, 12, 30, 7, '2026-11-29T12:00:00.500Z'],
      [2, 'ok', answer.settled_at, 12, 30, 7, 's2'],
      [3, 'failed', 'f', null, null, null, 's3']
    ])
    expect((await runCall(listTransitions(store.db, 'run-1'))).map((t) => t.seq)).toEqual([1, 2, 3])
    expect((await runCall(listSteps(store.db, 'run-1'))).map((s) => [s.step, s.tokens_out])).toEqual([
      [1, 7],
      [2, 7]
    ])
    expect((await runCall(writer.loadRun('run-1')))?.last?.seq).toBe(3)
    await runCall(writer.commit(stepCommit(4, true, 3)))
    expect((await runCall(writer.loadRun('run-1')))?.last?.seq).toBe(4)
    // Recovery settles the one receipt still pending (step 4's).
    expect(await runCall(writer.settlePending('run-1', token, 'unknown', 'z'))).toBe(1)
    expect(await rows('select step, outcome from attempts where step = 4')).toEqual([{ step: 4, outcome: 'unknown' }])
    expect((await runCall(listAttempts(store.db, 'run-1'))).map((a) => [a.step, a.outcome])).toEqual([
      [1, 'ok'],
      [2, 'ok'],
      [3, 'failed'],
      [4, 'unknown']
    ])
    // A receipt written again under its key is refused by the table's key.
    await expect(runCall(writer.write('run-1', token, [{ op: 'insertAttempt', row: attempt({ step: 2 }) }]))).rejects.toMatchObject({
      cause: { code: '23505' }
    })
    // Deleting the run deletes every row of it.
    await pool.query("delete from runs where id = 'run-1'")
    expect(
      await rows('select (select count(*) from attempts)::int as a, (select count(*) from steps)::int as s, (select count(*) from journal_entries)::int as j')
    ).toEqual([{ a: 0, s: 0, j: 0 }])
  })

  it("applies a commit's writes in their order when they do not come as a step's settlement, step and next receipt", async () => {
    const store = await tempStore('postgres')
    const writer = postgresRunWriter(store.pool!)
    const token = await runCall(writer.createRun(run(), { owner: 'me', expiresAt: 5000 }))
    await runCall(writer.createRun(run({ id: 'run-2' }), { owner: 'me', expiresAt: 5000 }))
    await runCall(
      writer.commit(
        commitOf(token, 1, {
          writes: [
            // A receipt settled by the commit that writes it: settled after it is written.
            { op: 'insertAttempt', row: attempt({ step: 1 }) },
            {
              op: 'settleAttempt',
              runId: 'run-1',
              step: 1,
              attempt: 0,
              patch: { outcome: 'failed', settled_at: 't', error_kind: 'transient', http_status: 500 }
            },
            { op: 'insertStep', row: step({ step: 1, text: 'one' }) },
            // A write for another run goes as it is too.
            { op: 'insertStep', row: step({ run_id: 'run-2', step: 1, text: 'other' }) },
            { op: 'insertAttempt', row: attempt({ step: 2, reason: 'retry' }) }
          ]
        })
      )
    )
    expect((await runCall(listAttempts(store.db, 'run-1'))).map((a) => [a.step, a.reason, a.outcome, a.error_kind, a.http_status])).toEqual([
      [1, 'initial', 'failed', 'transient', 500],
      [2, 'retry', 'pending', null, null]
    ])
    expect((await runCall(listSteps(store.db, 'run-1'))).map((s) => s.text)).toEqual(['one'])
    expect((await runCall(listSteps(store.db, 'run-2'))).map((s) => s.text)).toEqual(['other'])
  })
})
