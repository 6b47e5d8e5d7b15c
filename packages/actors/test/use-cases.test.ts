import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import type { TaskInput } from '@agentvisor/core'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Agentvisor } from '@agentvisor/actors'
import { getRun, insertApproval, listApprovals, listPolicyEvents, listRememberedRules, openStore, type Store } from '@agentvisor/store'
import { runCall } from '../../../test/support/run-call.js'

const dirs: string[] = []
const tempDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'av-use-cases-'))
  dirs.push(dir)
  return dir
}
let av: Agentvisor | undefined
let store: Store | undefined
afterEach(async () => {
  await av?.close()
  av = undefined
  await store?.close()
  store = undefined
})

/** An Agentvisor on a fresh SQLite file, and a second connection to read its rows with. */
const setup = async () => {
  const dir = tempDir()
  const db = path.join(dir, 'av.db')
  av = await Agentvisor.open({ db })
  store = await openStore(db)
  return { dir, av, store }
}

const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })

/** A task whose one write is not allowed by policy: with `approval: defer` the run pauses on it. */
const pausingTask = (dir: string, workspace: string, policy?: TaskInput['policy']): TaskInput => ({
  goal: 'Write DONE into out.txt',
  workspace: path.join(dir, workspace),
  approval: 'defer',
  providers: [{ name: 'p', kind: 'scripted', steps: [write('out.txt', 'DONE')] }],
  verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
  ...(policy !== undefined ? { policy } : {})
})

describe('Agentvisor.pending and Agentvisor.approve', () => {
  it("lists a paused run's request, decides it with source api and a remembered rule, and the resumed run performs it", async () => {
    const { dir, av, store } = await setup()
    const paused = await av.run(pausingTask(dir, 'ws'))
    expect(paused.status).toBe('awaiting_approval')

    const pending = await av.pending(paused.runId)
    expect(pending).toEqual([
      {
        id: expect.any(String),
        kind: 'approval',
        step: 1,
        act: 'write',
        target: 'out.txt',
        arguments: { path: 'out.txt', content: 'DONE' },
        rule: 'default',
        layer: 'default'
      }
    ])
    const outcome = await av.approve(paused.runId, { requestId: pending[0]!.id, decision: 'approve', remember: true })
    expect(outcome).toEqual({
      runId: paused.runId,
      decided: [{ id: pending[0]!.id, kind: 'approval', act: 'write', target: 'out.txt', status: 'approved' }],
      runStatus: 'awaiting_approval',
      pending: 0
    })
    expect(await runCall(listApprovals(store.db, paused.runId))).toEqual([
      expect.objectContaining({ id: pending[0]!.id, status: 'approved', source: 'api', remember: 1 })
    ])
    expect(await runCall(listPolicyEvents(store.db, paused.runId))).toEqual([
      expect.objectContaining({ kind: 'decision', decision: 'approved', source: 'api', request_id: pending[0]!.id, act: 'write', target: 'out.txt' })
    ])
    expect(await runCall(listRememberedRules(store.db, path.join(dir, 'ws')))).toEqual([
      expect.objectContaining({ act: 'write', pattern: 'out.txt', decision: 'allow' })
    ])
    expect(await av.pending(paused.runId)).toEqual([])

    const resumed = await (await av.resume(paused.runId)).result
    expect(resumed).toMatchObject({ runId: paused.runId, status: 'succeeded' })
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE')
  })

  it('refuses with a tagged error, recording nothing, an unknown run, an unknown or decided request and a run with nothing pending', async () => {
    const { dir, av, store } = await setup()
    const paused = await av.run(pausingTask(dir, 'ws'))
    const [request] = await av.pending(paused.runId)
    await expect(av.approve('no-such-run', { decision: 'approve' })).rejects.toMatchObject({ _tag: 'RunNotFoundError', message: 'no run with id no-such-run' })
    await expect(av.pending('no-such-run')).rejects.toMatchObject({ _tag: 'RunNotFoundError' })
    await expect(av.approve(paused.runId, { requestId: 'r-404', decision: 'approve' })).rejects.toMatchObject({
      _tag: 'RequestNotFoundError',
      message: `run ${paused.runId} has no request r-404`
    })
    expect((await runCall(listApprovals(store.db, paused.runId))).map((r) => r.status)).toEqual(['pending'])

    await av.approve(paused.runId, { decision: 'deny' })
    expect(await runCall(listApprovals(store.db, paused.runId))).toEqual([expect.objectContaining({ status: 'denied', source: 'api', remember: 0 })])
    await expect(av.approve(paused.runId, { requestId: request!.id, decision: 'approve' })).rejects.toMatchObject({
      _tag: 'RequestDecidedError',
      message: `request ${request!.id} was already denied`
    })
    await expect(av.approve(paused.runId, { decision: 'approve' })).rejects.toMatchObject({
      _tag: 'NothingPendingError',
      message: `run ${paused.runId} has no pending approval requests`
    })
    expect(await runCall(listPolicyEvents(store.db, paused.runId))).toHaveLength(1)
  })

  it('refuses an edit that crosses a deny and keeps the request pending; an allowed edit is stored as the call to perform', async () => {
    const { dir, av, store } = await setup()
    const paused = await av.run(pausingTask(dir, 'ws', { layers: [{ name: 'base', deny: { write: ['secrets/**'] } }] }))
    await expect(av.approve(paused.runId, { decision: 'approve', edit: { path: 'secrets/x.txt', content: 'x' } })).rejects.toMatchObject({
      _tag: 'EditRefusedError',
      message: 'the edited action is refused: write secrets/x.txt refused by rule "secrets/**" in layer "base"'
    })
    expect((await runCall(listApprovals(store.db, paused.runId))).map((r) => r.status)).toEqual(['pending'])

    await av.approve(paused.runId, { decision: 'approve', edit: { path: 'out.txt', content: 'DONE edited' } })
    const [row] = await runCall(listApprovals(store.db, paused.runId))
    expect(row).toMatchObject({ status: 'approved', source: 'api' })
    expect(row!.edited_payload).toEqual({ name: 'write_file', arguments: JSON.stringify({ path: 'out.txt', content: 'DONE edited' }) })
    expect((await (await av.resume(paused.runId)).result).status).toBe('succeeded')
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE edited')
  })

  it("settles a recovery request only with retry, completed or abort, and records the operator's account", async () => {
    const { dir, av, store } = await setup()
    const paused = await av.run(pausingTask(dir, 'ws'))
    const [approval] = await av.pending(paused.runId)
    await av.approve(paused.runId, { decision: 'deny' })
    // An exec interrupted after it started, as a resumed driver records it (docs/durability.md).
    await runCall(
      insertApproval(store.db, {
        id: 'recovery-1',
        run_id: paused.runId,
        step: 1,
        tool_call_id: 'call-9',
        kind: 'recovery',
        act: 'exec',
        target: 'make deploy',
        payload_json: JSON.stringify({ name: 'exec', arguments: JSON.stringify({ command: 'make deploy' }) }),
        rule: 'interrupted',
        layer: 'recovery',
        created_at: new Date().toISOString()
      })
    )
    expect(await av.pending(paused.runId)).toEqual([
      {
        id: 'recovery-1',
        kind: 'recovery',
        step: 1,
        act: 'exec',
        target: 'make deploy',
        arguments: { command: 'make deploy' },
        rule: 'interrupted',
        layer: 'recovery'
      }
    ])
    await expect(av.approve(paused.runId, { decision: 'approve' })).rejects.toMatchObject({
      _tag: 'RecoveryDecisionNeededError',
      message: `run ${paused.runId} is waiting for a recovery decision: retry, completed or abort`
    })
    await expect(av.approve(paused.runId, { requestId: 'recovery-1', decision: 'deny' })).rejects.toMatchObject({
      _tag: 'RecoveryDecisionNeededError',
      requestId: 'recovery-1'
    })
    await expect(av.approve(paused.runId, { requestId: approval!.id, decision: 'retry' })).rejects.toMatchObject({ _tag: 'RequestDecidedError' })

    const outcome = await av.approve(paused.runId, { decision: 'completed', account: 'it deployed once' })
    expect(outcome.decided).toEqual([{ id: 'recovery-1', kind: 'recovery', act: 'exec', target: 'make deploy', status: 'completed' }])
    expect((await runCall(listApprovals(store.db, paused.runId))).find((r) => r.id === 'recovery-1')).toMatchObject({
      status: 'approved',
      source: 'api',
      resolution: 'completed',
      account: 'it deployed once'
    })
    expect(await runCall(listPolicyEvents(store.db, paused.runId))).toContainEqual(
      expect.objectContaining({ kind: 'decision', decision: 'completed', source: 'api', request_id: 'recovery-1' })
    )
    await expect(av.approve(paused.runId, { decision: 'abort' })).rejects.toMatchObject({ _tag: 'NothingPendingError' })
  })
})

describe('Agentvisor.cancel', () => {
  it('ends a paused run nobody drives, records the request, and reports an ended run as already ended', async () => {
    const { dir, av, store } = await setup()
    const paused = await av.run(pausingTask(dir, 'ws'))
    expect(await av.cancel(paused.runId)).toEqual({ runId: paused.runId, status: 'cancelled', alreadyEnded: false })
    const row = await runCall(getRun(store.db, paused.runId))
    expect(row).toMatchObject({ status: 'cancelled', cancel_requested_at: expect.any(String), lease_owner: null })
    expect(existsSync(path.join(dir, 'ws', 'out.txt'))).toBe(false)
    expect(await av.cancel(paused.runId)).toEqual({ runId: paused.runId, status: 'cancelled', alreadyEnded: true })
    await expect(av.cancel('no-such-run')).rejects.toMatchObject({ _tag: 'RunNotFoundError' })
  })

  it('stops a run this same process drives: its own result says cancelled, not a lost lease', async () => {
    const { dir, av, store } = await setup()
    const started = await av.start({
      goal: 'g',
      workspace: path.join(dir, 'ws'),
      approval: 'auto',
      providers: [{ name: 'p', kind: 'scripted', steps: [{ ...write('out.txt', 'DONE'), delayMs: 60_000 }] }]
    })
    expect(await av.cancel(started.runId)).toEqual({ runId: started.runId, status: 'cancelled', alreadyEnded: false })
    expect(await started.result).toMatchObject({ runId: started.runId, status: 'cancelled' })
    expect((await runCall(getRun(store.db, started.runId)))?.status).toBe('cancelled')
    expect(existsSync(path.join(dir, 'ws', 'out.txt'))).toBe(false)
  })

  it('waits only so long for a driver elsewhere that does not stop, and leaves the request recorded', async () => {
    const { dir, av, store } = await setup()
    const paused = await av.run(pausingTask(dir, 'ws'))
    // A live driver on another host holds the run: this process may neither take it nor end it.
    await store.db
      .updateTable('runs')
      .set({ status: 'running', lease_owner: 'elsewhere/1/abcd/ffff', lease_expires_at: Date.now() + 60_000 })
      .where('id', '=', paused.runId)
      .execute()
    await expect(av.cancel(paused.runId, { waitMs: 300 })).rejects.toMatchObject({ _tag: 'CancelTimeoutError', runId: paused.runId })
    expect(await runCall(getRun(store.db, paused.runId))).toMatchObject({
      status: 'running',
      cancel_requested_at: expect.any(String),
      lease_owner: 'elsewhere/1/abcd/ffff'
    })
  })
})

describe('Agentvisor.list', () => {
  it('returns the runs --json rows, oldest first, filtered by status', async () => {
    const { dir, av } = await setup()
    const paused = await av.run(pausingTask(dir, 'one'))
    const done = await av.run({ ...pausingTask(dir, 'two'), approval: 'auto' })
    expect(done.status).toBe('succeeded')
    const all = await av.list()
    expect(all.map((r) => r.id)).toEqual([paused.runId, done.runId])
    expect(all[0]).toEqual({
      id: paused.runId,
      status: 'awaiting_approval',
      goal: 'Write DONE into out.txt',
      parentId: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      // A scripted provider that reports no usage: recorded as the run paused.
      usage: { inputTokens: 0, outputTokens: 0 }
    })
    expect((await av.list({ status: 'succeeded' })).map((r) => r.id)).toEqual([done.runId])
    expect(await av.list({ status: 'failed' })).toEqual([])
  })
})
