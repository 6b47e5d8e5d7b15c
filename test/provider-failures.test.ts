import * as path from 'node:path'
import type { TaskInput } from '@agentvisor/core'
import { it as effectIt } from '@effect/vitest'
import { Agentvisor, loadRunTrace, type RunTrace, StoreLive, Supervisor, SupervisorLive } from '@agentvisor/actors'
import { fallback, type ProviderConfig } from '@agentvisor/core'
import type { MockLlm } from '@agentvisor/cli'
import { openStore } from '@agentvisor/store'
import { Deferred, Effect, Layer, TestClock } from 'effect'
import { afterEach, describe, expect, it } from 'vitest'
import { tempDir } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { runCall } from './support/run-call.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined
let av: Agentvisor | undefined
afterEach(async () => {
  await av?.close()
  av = undefined
})

type Steps = Record<string, unknown[]>

const start = async (models: Steps): Promise<MockLlm> => {
  mock = await startMock.scenarios({ models })
  return mock
}

const callsTo = (m: MockLlm, model: string): number => m.requests.filter((r) => r.model === model).length

const provider = (name: string, model = name, extra: Partial<ProviderConfig> = {}): ProviderConfig => ({
  name,
  kind: 'openai',
  baseUrl: mock!.url,
  model,
  ...extra
})

const FAST_RETRY = { baseDelayMs: 1, maxDelayMs: 5, jitter: 0 }

const runTask = async (dir: string, task: Partial<TaskInput> & Pick<TaskInput, 'providers'>, options: Partial<Parameters<typeof Agentvisor.open>[0]> = {}) => {
  av = await Agentvisor.open({ db: path.join(dir, 'av.db'), retryPolicy: FAST_RETRY, ...options })
  const result = await av.run({ goal: 'Write DONE into out.txt', workspace: path.join(dir, 'ws'), approval: 'auto', ...task })
  const store = await openStore(path.join(dir, 'av.db'))
  try {
    return { result, trace: (await Effect.runPromise(loadRunTrace(store.db, result.runId)))! }
  } finally {
    await store.close()
  }
}

const writeDone = { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }
const verify = { fileContains: { path: 'out.txt', text: 'DONE' } }
const outcomes = (trace: RunTrace, step = 1) => trace.receipts.find((r) => r.step === step)!.attempts.map((a) => `${a.provider}:${a.reason}:${a.outcome}`)

describe('provider failure handling over HTTP', () => {
  it('falls over from a 503 primary to the secondary in the same step, asking the primary once', async () => {
    const llm = await start({ primary: [{ error: { status: 503 } }, { error: { status: 503 } }], secondary: [writeDone] })
    const { result, trace } = await runTask(tempDir(), { providers: [provider('primary'), provider('secondary')], verify })
    expect(result).toMatchObject({ status: 'succeeded', steps: 1 })
    expect(callsTo(llm, 'primary')).toBe(1)
    expect(trace.receipts).toEqual([
      {
        step: 1,
        winner: 1,
        attempts: [
          expect.objectContaining({ provider: 'primary', reason: 'initial', outcome: 'failed', errorKind: 'transient', httpStatus: 503 }),
          expect.objectContaining({ provider: 'secondary', reason: 'fallover', outcome: 'ok' })
        ]
      }
    ])
    expect(trace.transitions.map((t) => t.to)).toContain('fallingOver')
  })

  for (const status of [401, 400]) {
    it(`never falls over or retries on a ${status}: one call, the primary's kind and status`, async () => {
      const llm = await start({ primary: [{ error: { status } }], secondary: [writeDone] })
      const { result, trace } = await runTask(tempDir(), { providers: [provider('primary'), provider('secondary')], verify })
      expect(result).toMatchObject({
        status: 'failed',
        error: { kind: status === 401 ? 'auth' : 'request', httpStatus: status, provider: 'primary' }
      })
      expect(llm.requests).toHaveLength(1)
      expect(callsTo(llm, 'secondary')).toBe(0)
      expect(outcomes(trace)).toEqual(['primary:initial:failed'])
    })
  }

  it('dispatches exactly 6 times for 503/429 on every attempt of a 2-provider chain with maxRetries 2', async () => {
    const failing = Array.from({ length: 10 }, (_, i) => ({ error: { status: i % 2 === 0 ? 503 : 429, retryAfterMs: 0 } }))
    const llm = await start({ a: failing, b: failing })
    const { result, trace } = await runTask(tempDir(), { providers: [provider('a'), provider('b')], limits: { maxRetries: 2 } })
    expect(result).toMatchObject({ status: 'failed', error: { kind: 'transient' } })
    expect(llm.requests).toHaveLength(6)
    expect(outcomes(trace)).toEqual(['a:initial:failed', 'b:fallover:failed', 'a:retry:failed', 'b:fallover:failed', 'a:retry:failed', 'b:fallover:failed'])
  })

  it('retries the step after one 503: one receipt with [initial failed, retry ok], winner 1', async () => {
    await start({ primary: [{ error: { status: 503, retryAfterMs: 0 } }, writeDone] })
    const { result, trace } = await runTask(tempDir(), { providers: [provider('primary')], verify })
    expect(result).toMatchObject({ status: 'succeeded', steps: 1 })
    expect(trace.receipts).toHaveLength(1)
    expect(trace.receipts[0]).toMatchObject({ winner: 1 })
    expect(outcomes(trace)).toEqual(['primary:initial:failed', 'primary:retry:ok'])
    expect(trace.transitions.map((t) => t.to)).toContain('retrying')
  })

  it('stops at the dispatch ceiling: always 429 with maxRetries 5 and ceiling 2 is 2 dispatches', async () => {
    const llm = await start({ primary: Array.from({ length: 10 }, () => ({ error: { status: 429, retryAfterMs: 0 } })) })
    const { result } = await runTask(tempDir(), { providers: [provider('primary')], limits: { maxRetries: 5, dispatchCeiling: 2 } })
    expect(result).toMatchObject({ status: 'failed', error: { kind: 'ceiling', message: 'dispatch ceiling of 2 exhausted' } })
    expect(llm.requests).toHaveLength(2)
  })

  it('settles a cut stream unknown, keeps its partial text, and succeeds on the retry', async () => {
    await start({ primary: [{ text: 'I am writing the file now', disconnect: true }, writeDone] })
    const { result, trace } = await runTask(tempDir(), { providers: [provider('primary', 'primary', { stream: true })], verify })
    expect(result).toMatchObject({ status: 'succeeded', steps: 1 })
    const [cut, ok] = trace.receipts[0]!.attempts
    expect(cut).toMatchObject({ outcome: 'unknown', errorKind: 'transient' })
    expect(cut!.partialText).toBeTruthy()
    expect('I am writing the file now').toContain(cut!.partialText!)
    expect(ok).toMatchObject({ outcome: 'ok', reason: 'retry' })
    expect(ok!.ttftMs).not.toBeNull()
  })

  it('falls over through three nested providers to the one that is up', async () => {
    const llm = await start({ one: [{ error: { status: 503 } }], two: [{ error: { status: 502 } }], three: [writeDone] })
    const { result, trace } = await runTask(tempDir(), {
      providers: fallback(provider('one'), fallback(provider('two'), provider('three'))),
      verify
    })
    expect(result).toMatchObject({ status: 'succeeded', steps: 1 })
    expect(outcomes(trace)).toEqual(['one:initial:failed', 'two:fallover:failed', 'three:fallover:ok'])
    expect(trace.receipts[0]!.winner).toBe(2)
    expect(llm.requests).toHaveLength(3)
  })

  it('ends the run instead of sleeping when a Retry-After would pass the deadline', async () => {
    const llm = await start({ primary: [{ error: { status: 503, retryAfterMs: 3_600_000 } }, writeDone] })
    const { result } = await runTask(tempDir(), { providers: [provider('primary')], verify, limits: { timeoutMs: 60_000 } })
    expect(result).toMatchObject({ status: 'failed', error: { kind: 'transient', httpStatus: 503 } })
    expect(result.error!.message).toMatch(/not retrying: the wait would pass the run's deadline/)
    expect(llm.requests).toHaveLength(1)
  })

  it('aborts an attempt that passes its deadline, settles it unknown, and retries', async () => {
    const llm = await start({ primary: [{ delayMs: 30_000, text: 'too late' }, writeDone] })
    const { result, trace } = await runTask(tempDir(), { providers: [provider('primary', 'primary', { attemptTimeoutMs: 300 })], verify })
    expect(result).toMatchObject({ status: 'succeeded' })
    expect(outcomes(trace)).toEqual(['primary:initial:unknown', 'primary:retry:ok'])
    expect(trace.receipts[0]!.attempts[0]!.message).toMatch(/attempt deadline of 300 ms/)
    expect(llm.abandoned).toHaveLength(1)
  })

  it('skips a provider whose circuit opened, without calling it, across runs of one process', async () => {
    const llm = await start({ primary: [{ error: { status: 503 } }, { error: { status: 503 } }, writeDone], secondary: [writeDone, writeDone, writeDone] })
    const dir = tempDir()
    av = await Agentvisor.open({ db: path.join(dir, 'av.db'), retryPolicy: FAST_RETRY, circuitBreaker: { failureThreshold: 2, cooldownMs: 3_600_000 } })
    const task = (n: number): TaskInput => ({
      goal: 'g',
      workspace: path.join(dir, `ws${n}`),
      approval: 'auto',
      providers: [provider('primary'), provider('secondary')],
      verify
    })
    for (const n of [1, 2, 3]) expect(await av.run(task(n))).toMatchObject({ status: 'succeeded' })
    expect(callsTo(llm, 'primary')).toBe(2)
    expect(callsTo(llm, 'secondary')).toBe(3)
    const runs = await openStore(path.join(dir, 'av.db'))
    try {
      const { listRuns } = await import('@agentvisor/store')
      const third = (await runCall(listRuns(runs.db))).at(-1)!
      const trace = (await Effect.runPromise(loadRunTrace(runs.db, third.id)))!
      expect(trace.receipts[0]!.attempts[0]).toMatchObject({ provider: 'primary', outcome: 'failed', message: 'circuit open' })
      expect(trace.transitions[0]).toMatchObject({ event: 'CIRCUIT_OPEN', to: 'fallingOver' })
    } finally {
      await runs.close()
    }
  })
})

describe('Retry-After with a fake clock', () => {
  effectIt.scoped('waits the 2 s a provider asked for before retrying, and not a moment less', () =>
    Effect.gen(function* () {
      const llm = yield* Effect.promise(() => start({ primary: [{ error: { status: 503, retryAfterMs: 2000 } }, writeDone] }))
      const dir = tempDir()
      const supervisor = yield* Supervisor
      const retrying = yield* Deferred.make<void>()
      const events: string[] = []
      const handle = yield* supervisor.start(
        Agentvisor.contract({ goal: 'g', workspace: path.join(dir, 'ws'), approval: 'auto', providers: [provider('primary')], verify }),
        {
          observers: [
            {
              onTransition: (t) => {
                events.push(t.event)
                if (t.to === 'retrying') Deferred.unsafeDone(retrying, Effect.void)
              }
            }
          ]
        }
      )
      yield* Deferred.await(retrying)
      const settle = Effect.promise(() => new Promise((r) => setTimeout(r, 100)))
      yield* TestClock.adjust('1999 millis')
      yield* settle
      expect(llm.requests).toHaveLength(1)
      expect(events).not.toContain('RETRY_DUE')
      yield* TestClock.adjust('1 millis')
      const result = yield* handle.result
      expect(result).toMatchObject({ status: 'succeeded' })
      expect(llm.requests).toHaveLength(2)
      expect(events).toContain('RETRY_DUE')
    }).pipe(
      Effect.provide(
        SupervisorLive({ retryPolicy: { baseDelayMs: 10, maxDelayMs: 10, jitter: 0 } }).pipe(Layer.provideMerge(StoreLive(path.join(tempDir(), 'av.db'))))
      ),
      Effect.ensuring(Effect.promise(async () => mock?.close()))
    )
  )
})
