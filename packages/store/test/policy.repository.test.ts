import { describe, expect, it } from 'vitest'
import {
  decideApproval,
  insertApproval,
  insertPolicyEvents,
  insertRun,
  listApprovals,
  listPolicyEvents,
  listRememberedRules,
  rememberRule
} from '@agentvisor/store'
import { DIALECTS, run, tempStore } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

const request = (id: string, toolCallId = id) => ({
  id,
  run_id: 'run-1',
  step: 1,
  tool_call_id: toolCallId,
  act: 'write',
  target: 'out.txt',
  payload_json: JSON.stringify({ name: 'write_file', arguments: '{"path":"out.txt","content":"x"}' }),
  rule: 'default',
  layer: 'default',
  source: null,
  edited_payload_json: null,
  created_at: '2026-11-29T12:00:00.000Z',
  decided_at: null
})

const decision = { status: 'approved', source: 'cli', remember: false, editedPayloadJson: null, decidedAt: '2026-11-29T12:01:00.000Z' } as const

describe.each(DIALECTS)('policy repositories on %s', (dialect) => {
  it('keeps one request per tool call of a step, however often it is asked for', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertApproval(db, request('a1', 'call_1')))
    await runCall(insertApproval(db, request('a2', 'call_1')))
    expect((await runCall(listApprovals(db, 'run-1'))).map((r) => r.id)).toEqual(['a1'])
  })

  it('lists requests by step and position, the same on every dialect when those tie', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertApproval(db, { ...request('b', 'call_b'), step: 2 }))
    await runCall(insertApproval(db, request('z', 'call_z')))
    await runCall(insertApproval(db, request('y', 'call_y')))
    await runCall(insertApproval(db, { ...request('x', 'call_x'), position: 1 }))
    expect((await runCall(listApprovals(db, 'run-1'))).map((r) => r.id)).toEqual(['y', 'z', 'x', 'b'])
  })

  it('decides a request once: a second decision loses and changes nothing', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertApproval(db, request('a1')))
    expect(await runCall(decideApproval(db, 'a1', decision))).toBe(true)
    expect(await runCall(decideApproval(db, 'a1', { ...decision, status: 'denied', source: 'nats' }))).toBe(false)
    expect(await runCall(listApprovals(db, 'run-1', 1))).toEqual([
      expect.objectContaining({ status: 'approved', source: 'cli', decided_at: decision.decidedAt })
    ])
  })

  it('appends policy events in order and rejects an unknown kind', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    const event = {
      run_id: 'run-1',
      step: 1,
      kind: 'refusal',
      act: 'write',
      target: 'secrets/k',
      rule: 'secrets/**',
      layer: 'base',
      decision: 'deny',
      source: 'policy',
      request_id: null,
      performed_target: null,
      at: 't'
    } as const
    await runCall(insertPolicyEvents(db, [event, { ...event, target: 'secrets/j' }]))
    expect((await runCall(listPolicyEvents(db, 'run-1'))).map((e) => e.target)).toEqual(['secrets/k', 'secrets/j'])
    await expect(runCall(insertPolicyEvents(db, [{ ...event, kind: 'other' as never }]))).rejects.toThrow()
  })

  it('remembers one decision per workspace, act and target, the latest winning', async () => {
    const { db } = await tempStore(dialect)
    const rule = { workspace: '/ws', act: 'exec', pattern: 'npm test', decision: 'allow', run_id: null, created_at: 't1' } as const
    await runCall(rememberRule(db, rule))
    await runCall(rememberRule(db, { ...rule, decision: 'deny', created_at: 't2' }))
    await runCall(rememberRule(db, { ...rule, workspace: '/other' }))
    expect(await runCall(listRememberedRules(db, '/ws'))).toEqual([expect.objectContaining({ pattern: 'npm test', decision: 'deny' })])
  })

  it('lists remembered decisions oldest first, ties by act then target', async () => {
    const { db } = await tempStore(dialect)
    const rule = { workspace: '/ws', act: 'write', pattern: 'b.txt', decision: 'allow', run_id: null, created_at: 't1' } as const
    await runCall(rememberRule(db, rule))
    await runCall(rememberRule(db, { ...rule, pattern: 'a.txt' }))
    await runCall(rememberRule(db, { ...rule, act: 'exec', pattern: 'z' }))
    await runCall(rememberRule(db, { ...rule, pattern: 'first', created_at: 't0' }))
    expect((await runCall(listRememberedRules(db, '/ws'))).map((r) => `${r.act} ${r.pattern}`)).toEqual(['write first', 'exec z', 'write a.txt', 'write b.txt'])
  })
})
