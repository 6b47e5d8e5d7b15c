import { describe, expect, it } from 'vitest'
import {
  AttemptOutcome,
  countTreeDispatches,
  insertAttempt,
  insertRun,
  keepPartialText,
  listAttempts,
  settleAttempt,
  settlePendingAttempts,
  type AttemptReason
} from '@agentvisor/store'
import { DIALECTS, attempt, run, tempStore } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

describe.each(DIALECTS)('attempts repository on %s', (dialect) => {
  it('writes a receipt as pending with every measurement unknown', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertAttempt(db, attempt()))
    expect(await runCall(listAttempts(db, 'run-1'))).toEqual([
      {
        ...attempt(),
        outcome: 'pending',
        error_kind: null,
        http_status: null,
        error_message: null,
        latency_ms: null,
        ttft_ms: null,
        tokens_in: null,
        tokens_out: null,
        partial_text: null,
        settled_at: null
      }
    ])
  })

  it('settles a pending receipt with what the call reported, keeping an unknown ttft null', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertAttempt(db, attempt()))
    const settled = await runCall(
      settleAttempt(db, 'run-1', 1, 0, {
        outcome: 'failed',
        error_kind: 'transient',
        http_status: 503,
        error_message: 'Service Unavailable',
        latency_ms: 42,
        ttft_ms: null,
        partial_text: 'par',
        settled_at: '2026-11-29T12:00:00.600Z'
      })
    )
    expect(settled).toBe(true)
    expect(await runCall(listAttempts(db, 'run-1'))).toMatchObject([
      {
        outcome: 'failed',
        error_kind: 'transient',
        http_status: 503,
        error_message: 'Service Unavailable',
        latency_ms: 42,
        ttft_ms: null,
        tokens_in: null,
        partial_text: 'par',
        settled_at: '2026-11-29T12:00:00.600Z'
      }
    ])
  })

  it("keeps a pending receipt's streamed text, the other receipts' and columns left as they are, and never a settled one's", async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertAttempt(db, attempt()))
    await runCall(insertAttempt(db, attempt({ attempt: 1 })))
    expect(await runCall(keepPartialText(db, 'run-1', 1, 0, 'I am wri'))).toBe(true)
    expect(await runCall(keepPartialText(db, 'run-1', 1, 0, 'I am writing ✓ "it"'))).toBe(true)
    const [kept, other] = await runCall(listAttempts(db, 'run-1'))
    expect(kept).toMatchObject({ ...attempt(), outcome: 'pending', partial_text: 'I am writing ✓ "it"', settled_at: null })
    expect(other).toMatchObject({ attempt: 1, outcome: 'pending', partial_text: null })

    await runCall(settleAttempt(db, 'run-1', 1, 0, { outcome: AttemptOutcome.unknown, settled_at: '2026-11-29T12:00:09.000Z' }))
    expect(await runCall(keepPartialText(db, 'run-1', 1, 0, 'later'))).toBe(false)
    expect((await runCall(listAttempts(db, 'run-1')))[0]).toMatchObject({ outcome: 'unknown', partial_text: 'I am writing ✓ "it"' })
    expect(await runCall(keepPartialText(db, 'run-1', 9, 0, 'no such receipt'))).toBe(false)
  })

  it('never rewrites a receipt that is already settled', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertAttempt(db, attempt()))
    await runCall(settlePendingAttempts(db, 'run-1', AttemptOutcome.unknown, '2026-11-29T12:01:00.000Z'))

    const late = await runCall(settleAttempt(db, 'run-1', 1, 0, { outcome: 'ok', latency_ms: 10, settled_at: '2026-11-29T12:02:00.000Z' }))
    expect(late).toBe(false)
    expect(await runCall(listAttempts(db, 'run-1'))).toMatchObject([{ outcome: 'unknown', latency_ms: null, settled_at: '2026-11-29T12:01:00.000Z' }])
    expect(await runCall(settleAttempt(db, 'run-1', 7, 0, { outcome: 'ok', settled_at: '2026-11-29T12:02:00.000Z' }))).toBe(false)
  })

  it('settles only the still-pending receipts of the given run and says how many', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertRun(db, run({ id: 'other' })))
    await runCall(insertAttempt(db, attempt({ attempt: 0 })))
    await runCall(settleAttempt(db, 'run-1', 1, 0, { outcome: 'failed', error_kind: 'transient', settled_at: '2026-11-29T12:00:01.000Z' }))
    await runCall(insertAttempt(db, attempt({ attempt: 1, provider: 'secondary', reason: 'fallover' })))
    await runCall(insertAttempt(db, attempt({ step: 2, attempt: 0 })))
    await runCall(insertAttempt(db, attempt({ run_id: 'other' })))

    expect(await runCall(settlePendingAttempts(db, 'run-1', AttemptOutcome.unknown, '2026-11-29T12:09:00.000Z'))).toBe(2)

    const mine = await runCall(listAttempts(db, 'run-1'))
    expect(mine.map((row) => [row.step, row.attempt, row.outcome, row.settled_at])).toEqual([
      [1, 0, 'failed', '2026-11-29T12:00:01.000Z'],
      [1, 1, 'unknown', '2026-11-29T12:09:00.000Z'],
      [2, 0, 'unknown', '2026-11-29T12:09:00.000Z']
    ])
    expect(await runCall(listAttempts(db, 'other'))).toMatchObject([{ outcome: 'pending', settled_at: null }])
    expect(await runCall(settlePendingAttempts(db, 'run-1', AttemptOutcome.unknown))).toBe(0)
  })

  it('counts the dispatches of a whole run tree as a number, leaving out skipped providers', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run({ id: 'root' })))
    await runCall(insertRun(db, run({ id: 'child', parent_id: 'root', root_id: 'root' })))
    await runCall(insertRun(db, run({ id: 'elsewhere' })))
    await runCall(insertAttempt(db, attempt({ run_id: 'root' })))
    await runCall(insertAttempt(db, attempt({ run_id: 'root', attempt: 1, error_message: 'circuit open' })))
    await runCall(insertAttempt(db, attempt({ run_id: 'child' })))
    await runCall(insertAttempt(db, attempt({ run_id: 'child', attempt: 1, error_message: 'rate limited' })))
    await runCall(insertAttempt(db, attempt({ run_id: 'elsewhere' })))
    expect(await runCall(countTreeDispatches(db, 'root'))).toBe(3)
    expect(await runCall(countTreeDispatches(db, 'nobody'))).toBe(0)
  })

  it('lists receipts by step, then attempt', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertAttempt(db, attempt({ step: 2, attempt: 0 })))
    await runCall(insertAttempt(db, attempt({ step: 1, attempt: 1, reason: 'retry' })))
    await runCall(insertAttempt(db, attempt({ step: 1, attempt: 0 })))
    expect((await runCall(listAttempts(db, 'run-1'))).map((row) => [row.step, row.attempt])).toEqual([
      [1, 0],
      [1, 1],
      [2, 0]
    ])
  })

  it('rejects a duplicate receipt, an unknown reason and a receipt for an unknown run', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertAttempt(db, attempt()))
    await expect(runCall(insertAttempt(db, attempt()))).rejects.toThrow(/UNIQUE|PRIMARY KEY/i)
    await expect(runCall(insertAttempt(db, attempt({ attempt: 1, reason: 'again' as AttemptReason })))).rejects.toThrow(/CHECK constraint/i)
    await expect(runCall(insertAttempt(db, attempt({ run_id: 'ghost' })))).rejects.toThrow(/FOREIGN KEY/i)
    expect(await runCall(listAttempts(db, 'run-1'))).toHaveLength(1)
  })
})
