import { existsSync, readFileSync } from 'node:fs'
import type { TaskInput } from '@agentvisor/core'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { openStore } from '@agentvisor/store'
import { processGroupAlive } from '@agentvisor/core'
import { makeScriptedProvider } from '@agentvisor/core/testing'
import { scriptedRunsPerTest, writeStep as write } from '../../../test/support/scripted-runs.js'

const { folder: tempDir, open: openAgentvisor, task, trace } = scriptedRunsPerTest()
const open = (dir: string) => openAgentvisor(dir, { retryPolicy: { baseDelayMs: 1, maxDelayMs: 5, jitter: 0 } })

describe('the supervisor', () => {
  it('falls over to the secondary on a 503 and records both attempts in one receipt', async () => {
    const dir = tempDir()
    const result = await (await open(dir)).run(
      task(
        dir,
        { primary: [{ error: { status: 503 } }], secondary: [write('out.txt', 'DONE')] },
        { verify: { fileContains: { path: 'out.txt', text: 'DONE' } } }
      )
    )
    expect(result).toMatchObject({ status: 'succeeded', steps: 1 })
    const t = await trace(dir, result.runId)
    expect(t.receipts).toEqual([
      {
        step: 1,
        winner: 1,
        attempts: [
          expect.objectContaining({ provider: 'primary', reason: 'initial', outcome: 'failed', errorKind: 'transient', httpStatus: 503 }),
          expect.objectContaining({ provider: 'secondary', reason: 'fallover', outcome: 'ok' })
        ]
      }
    ])
    expect(t.transitions.map((x) => x.to)).toEqual(['fallingOver', 'dispatching', 'acting', 'verifying', 'finished.succeeded'])
  })

  it('commits a step whose tools only read together with the next receipt, and tells observers only what is durable', async () => {
    const dir = tempDir()
    const store = await openStore(path.join(dir, 'av.db'))
    const durable = (runId: string) => ({
      transitions: (store.sqlite!.prepare('SELECT count(*) AS n FROM transitions WHERE run_id = ?').get(runId) as { n: number }).n,
      receipts: (store.sqlite!.prepare('SELECT count(*) AS n FROM attempts WHERE run_id = ?').get(runId) as { n: number }).n
    })
    const seen: string[] = []
    const atToolResult: Array<{ name: string; transitions: number; receipts: number }> = []
    try {
      const result = await (await open(dir)).run(
        task(dir, [{ toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] }, write('a.txt', 'x'), { text: 'finished' }]),
        {
          observers: [
            {
              onTransition: (t) => void seen.push(`${t.seq} ${t.from}>${t.to}`),
              onToolCall: (c) => void seen.push(`call ${c.name}`),
              onToolResult: (r) => {
                seen.push(`result ${r.name}`)
                atToolResult.push({ name: r.name, ...durable(r.runId) })
              }
            }
          ]
        }
      )
      expect(result).toMatchObject({ status: 'succeeded', steps: 3 })
    } finally {
      await store.close()
    }
    // The listing changed nothing: its reply, its result and the next dispatch's receipt became
    // durable in one commit, so by the time observers hear of it the step is all in the store.
    // The write's reply was durable before the file was written, and its transitions after it.
    expect(atToolResult).toEqual([
      { name: 'list_dir', transitions: 3, receipts: 2 },
      { name: 'write_file', transitions: 4, receipts: 2 }
    ])
    expect(seen).toEqual([
      '1 dispatching>acting',
      'call list_dir',
      'result list_dir',
      '2 acting>verifying',
      '3 verifying>dispatching',
      '4 dispatching>acting',
      'call write_file',
      'result write_file',
      '5 acting>verifying',
      '6 verifying>dispatching',
      '7 dispatching>verifying',
      '8 verifying>finished.succeeded'
    ])
  })

  it('never falls over on a 401 and reports the primary kind, status and provider', async () => {
    const dir = tempDir()
    const result = await (await open(dir)).run(task(dir, { primary: [{ error: { status: 401 } }], secondary: [write('out.txt', 'DONE')] }))
    expect(result).toMatchObject({ status: 'failed', steps: 0, error: { kind: 'auth', httpStatus: 401, provider: 'primary' } })
    expect(existsSync(path.join(dir, 'ws', 'out.txt'))).toBe(false)
    const t = await trace(dir, result.runId)
    expect(t.receipts[0]!.attempts).toHaveLength(1)
  })

  it('retries the step from the primary after the chain is exhausted, up to maxRetries', async () => {
    const dir = tempDir()
    const result = await (await open(dir)).run(
      task(dir, [{ error: { status: 503 } }, { error: { status: 429 } }, { disconnect: true }], { limits: { maxRetries: 2 } })
    )
    expect(result).toMatchObject({ status: 'failed', error: { kind: 'transient' } })
    const t = await trace(dir, result.runId)
    expect(t.receipts[0]!.attempts.map((a) => [a.reason, a.outcome])).toEqual([
      ['initial', 'failed'],
      ['retry', 'failed'],
      ['retry', 'unknown']
    ])
  })

  it('stops before the dispatch that would pass the ceiling', async () => {
    const dir = tempDir()
    const result = await (await open(dir)).run(
      task(dir, [{ error: { status: 503 } }, { error: { status: 503 } }, { error: { status: 503 } }], { limits: { maxRetries: 5, dispatchCeiling: 2 } })
    )
    expect(result).toMatchObject({ status: 'failed', error: { kind: 'ceiling', message: 'dispatch ceiling of 2 exhausted' } })
    expect((await trace(dir, result.runId)).receipts[0]!.attempts).toHaveLength(2)
  })

  it('succeeds without a verify contract when the model answers without tool calls', async () => {
    const dir = tempDir()
    const result = await (await open(dir)).run(task(dir, [write('a.txt', 'x'), { text: 'finished' }]))
    expect(result).toMatchObject({ status: 'succeeded', steps: 2 })
    expect(readFileSync(path.join(dir, 'ws', 'a.txt'), 'utf8')).toBe('x')
  })

  it('cancels a run mid-dispatch: the attempt settles cancelled and the run ends cancelled', async () => {
    const dir = tempDir()
    const agentvisor = await open(dir)
    let dispatched!: () => void
    const inFlight = new Promise<void>((resolve) => (dispatched = resolve))
    const run = await agentvisor.start(task(dir, [{ delayMs: 60_000, text: 'late' }]), { observers: [{ onDispatch: () => dispatched() }] })
    await inFlight
    await run.cancel()
    const result = await run.result
    expect(result).toMatchObject({ status: 'cancelled', error: { kind: 'cancelled' } })
    const t = await trace(dir, run.runId)
    expect(t.receipts[0]!.attempts).toEqual([expect.objectContaining({ outcome: 'cancelled' })])
    expect(t.transitions.at(-1)).toMatchObject({ from: 'dispatching', event: 'CANCEL', to: 'finished.cancelled' })
  })

  it('ends timed_out when the run passes its wall-clock timeout', async () => {
    const dir = tempDir()
    const result = await (await open(dir)).run(
      task(dir, [{ toolCalls: [{ name: 'exec', arguments: { command: 'echo $$ > pid.txt; sleep 30 & sleep 30; wait' } }] }], { limits: { timeoutMs: 800 } })
    )
    expect(result).toMatchObject({ status: 'timed_out', error: { kind: 'timeout' } })
    // The tool's whole process group is gone by the time the run reports its end.
    const pid = Number(readFileSync(path.join(dir, 'ws', 'pid.txt'), 'utf8'))
    expect(processGroupAlive(pid)).toBe(false)
    const t = await trace(dir, result.runId)
    expect(t.transitions.at(-1)).toMatchObject({ from: 'acting', event: 'TIMEOUT', to: 'finished.timedOut' })
  })
})

describe('the rows of runs started from code', () => {
  it('name no root for a root run, and the root of the parent tree for a run started under a parent', async () => {
    const dir = tempDir()
    const agentvisor = await open(dir)
    const saying = (goal: string): TaskInput => task(dir, [{ text: 'ok' }], { goal })
    const root = await agentvisor.run(saying('root'))
    const child = await agentvisor.run(saying('child'), { parentId: root.runId })
    const grandchild = await agentvisor.run(saying('grandchild'), { parentId: child.runId })
    const store = await openStore(path.join(dir, 'av.db'))
    try {
      const rows = await store.db.selectFrom('runs').select(['id', 'parent_id', 'root_id']).execute()
      const byId = new Map(rows.map((r) => [r.id, r]))
      expect(byId.get(root.runId)).toEqual({ id: root.runId, parent_id: null, root_id: null })
      expect(byId.get(child.runId)).toEqual({ id: child.runId, parent_id: root.runId, root_id: root.runId })
      expect(byId.get(grandchild.runId)).toEqual({ id: grandchild.runId, parent_id: child.runId, root_id: root.runId })
    } finally {
      await store.close()
    }
  })
})

describe('approvals from the TypeScript API', () => {
  it('asks a programmatic approver and performs exactly what it approved', async () => {
    const dir = tempDir()
    const asked: string[] = []
    const av = await openAgentvisor(dir, {
      approver: {
        source: 'api',
        decide: async (request) => {
          asked.push(`${request.act} ${request.target}`)
          return request.target === 'out.txt' ? { decision: 'approve' } : { decision: 'deny' }
        }
      }
    })
    const result = await av.run(
      task(
        dir,
        [
          {
            toolCalls: [
              { name: 'write_file', arguments: { path: 'other.txt', content: 'x' } },
              { name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }
            ]
          }
        ],
        { approval: 'prompt', verify: { fileContains: { path: 'out.txt', text: 'DONE' } } }
      )
    )
    expect(result).toMatchObject({ status: 'succeeded' })
    expect(asked).toEqual(['write other.txt', 'write out.txt'])
    expect(existsSync(path.join(dir, 'ws', 'other.txt'))).toBe(false)
    const t = await trace(dir, result.runId)
    expect(t.policyEvents.map((e) => [e.target, e.decision, e.source])).toEqual([
      ['other.txt', 'denied', 'api'],
      ['out.txt', 'approved', 'api']
    ])
  })

  it('keeps the request pending and pauses the run when the approver throws, logs the cause, and asks again on resume', async () => {
    const dir = tempDir()
    const logged: string[] = []
    let failing = true
    const asked: string[] = []
    const av = await openAgentvisor(dir, {
      log: (line: string) => logged.push(line),
      approver: {
        source: 'api' as const,
        decide: async (request: { readonly target: string }) => {
          asked.push(request.target)
          if (failing) throw new Error('approval service unreachable')
          return { decision: 'approve' as const }
        }
      }
    })
    const result = await av.run(task(dir, [write('out.txt', 'DONE')], { approval: 'prompt', verify: { fileContains: { path: 'out.txt', text: 'DONE' } } }))
    expect(result).toMatchObject({ status: 'awaiting_approval' })
    expect(existsSync(path.join(dir, 'ws', 'out.txt'))).toBe(false)
    const paused = await trace(dir, result.runId)
    expect(paused.approvals.map((a) => [a.target, a.status])).toEqual([['out.txt', 'pending']])
    expect(paused.policyEvents.filter((e) => e.kind === 'decision')).toEqual([])
    const requestId = paused.approvals[0]!.id
    expect(logged).toEqual([
      `run ${result.runId}: the approver gave no answer to request ${requestId}: approval service unreachable; the request stays pending and the run pauses until it is decided (approve, then resume)`
    ])
    failing = false
    const resumed = await av.resume(result.runId)
    expect(await resumed.result).toMatchObject({ status: 'succeeded' })
    expect(asked).toEqual(['out.txt', 'out.txt'])
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE')
  })

  it("keeps the request pending when the approver's edit crosses a deny, and writes nothing", async () => {
    const dir = tempDir()
    const logged: string[] = []
    const av = await openAgentvisor(dir, {
      log: (line) => logged.push(line),
      approver: { source: 'api', decide: async () => ({ decision: 'approve', edit: { path: 'secret.txt', content: 'x' } }) }
    })
    const result = await av.run(
      task(dir, [write('out.txt', 'DONE')], { approval: 'prompt', policy: { layers: [{ name: 'base', deny: { write: ['secret*'] } }] } })
    )
    expect(result).toMatchObject({ status: 'awaiting_approval' })
    const paused = await trace(dir, result.runId)
    expect(paused.approvals.map((a) => [a.target, a.status])).toEqual([['out.txt', 'pending']])
    expect(existsSync(path.join(dir, 'ws', 'secret.txt'))).toBe(false)
    expect(logged).toHaveLength(1)
    expect(logged[0]).toMatch(
      new RegExp(`^run ${result.runId}: the approver's edit of request ${paused.approvals[0]!.id} is refused: the edited action is refused: `)
    )
  })

  it('refuses to resume a run whose stored policy cannot be read instead of running permissively', async () => {
    const dir = tempDir()
    const agentvisor = await open(dir)
    const paused = await agentvisor.run(task(dir, [write('out.txt', 'DONE')], { approval: 'defer' }))
    expect(paused.status).toBe('awaiting_approval')
    await agentvisor.close()
    const store = await openStore(path.join(dir, 'av.db'))
    const row = (await store.db.selectFrom('run_contracts').select('contract_json').where('run_id', '=', paused.runId).executeTakeFirstOrThrow()).contract_json
    const broken = { ...JSON.parse(row), policy: { layers: [{ name: 'base', deny: { write: ['[unclosed'] } }] } }
    await store.db
      .updateTable('run_contracts')
      .set({ contract_json: JSON.stringify(broken) })
      .where('run_id', '=', paused.runId)
      .execute()
    await store.close()
    const again = await open(dir)
    await expect(again.resume(paused.runId)).rejects.toMatchObject({ _tag: 'RunNotResumableError' })
    expect(existsSync(path.join(dir, 'ws', 'out.txt'))).toBe(false)
  })

  it('resumes a run shut down in the middle of a dispatch with a new attempt, the old one settled cancelled', async () => {
    const dir = tempDir()
    const first = await open(dir)
    const started = await first.start(
      task(dir, [{ ...write('out.txt', 'DONE'), delayMs: 60_000 }], { verify: { fileContains: { path: 'out.txt', text: 'DONE' } } })
    )
    const store = await openStore(path.join(dir, 'av.db'))
    try {
      for (let i = 0; i < 200; i++) {
        if ((await store.db.selectFrom('attempts').select('attempt').where('run_id', '=', started.runId).execute()).length > 0) break
        await new Promise((r) => setTimeout(r, 25))
      }
    } finally {
      await store.close()
    }
    // A graceful shutdown (not a cancel of the run): the call is aborted, the run stays resumable.
    await first.close()
    const av = await openAgentvisor(dir, {
      // The aborted call was the provider's first dispatch: the new attempt is its second (docs/task-file.md, "Providers").
      makeProvider: (config) => makeScriptedProvider({ name: config.name, steps: [{ text: 'the aborted call: never played' }, write('out.txt', 'DONE')] })
    })
    const resumed = await av.resume(started.runId)
    expect(await resumed.result).toMatchObject({ status: 'succeeded', steps: 1 })
    const t = await trace(dir, started.runId)
    expect(t.receipts).toEqual([
      {
        step: 1,
        winner: 1,
        attempts: [expect.objectContaining({ reason: 'initial', outcome: 'cancelled' }), expect.objectContaining({ reason: 'retry', outcome: 'ok' })]
      }
    ])
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE')
  })

  it('starts and resumes many runs at once in shared transactions: each created leased, its first receipt durable before its call, its lease taken again and given up', async () => {
    const dir = tempDir()
    const first = await open(dir)
    const runs = 8
    const late = task(dir, [{ text: 'late', delayMs: 60_000 }])
    const started = await Promise.all(Array.from({ length: runs }, () => first.start(late)))
    const ids = started.map((r) => r.runId)
    const store = await openStore(path.join(dir, 'av.db'))
    try {
      // Every call in flight has its receipt: the group commit acknowledged it first.
      for (let i = 0; i < 200; i++) {
        if ((await store.db.selectFrom('attempts').select('run_id').execute()).length >= runs) break
        await new Promise((r) => setTimeout(r, 25))
      }
      const receipts = await store.db.selectFrom('attempts').select(['run_id', 'outcome']).execute()
      expect(receipts.map((r) => r.run_id).sort()).toEqual([...ids].sort())
      expect(receipts.every((r) => r.outcome === 'pending')).toBe(true)
      const rows = await store.db.selectFrom('runs').select(['id', 'lease_token', 'lease_owner']).execute()
      expect(rows).toHaveLength(runs)
      expect(rows.every((r) => r.lease_token === 1 && r.lease_owner !== null)).toBe(true)
    } finally {
      await store.close()
    }
    await first.close()
    const av = await openAgentvisor(dir, { makeProvider: (config) => makeScriptedProvider({ name: config.name, steps: [{ text: 'done' }] }) })
    const resumed = await Promise.all(ids.map((id) => av.resume(id)))
    const results = await Promise.all(resumed.map((r) => r.result))
    expect(results.map((r) => r.status)).toEqual(Array.from({ length: runs }, () => 'succeeded'))
    await av.close()
    const after = await openStore(path.join(dir, 'av.db'))
    try {
      const rows = await after.db.selectFrom('runs').select(['lease_token', 'lease_owner', 'status']).execute()
      expect(rows.every((r) => r.lease_token === 2 && r.lease_owner === null && r.status === 'succeeded')).toBe(true)
    } finally {
      await after.close()
    }
  })
})
