import * as path from 'node:path'
import { Agentvisor } from '@agentvisor/actors'
import { getRun, insertRun, openStore, type Store } from '@agentvisor/store'
import { Effect, Exit, Scope } from 'effect'
import { afterEach, describe, expect, it } from 'vitest'
import { type Bus, MAX_CHILD_HANDLING_FAILURES } from '../packages/actors/src/protocol/bus.js'
import { makeInProcessBus } from '../packages/actors/src/bus/in-process-bus.js'
import { PROTOCOL_VERSION } from '../packages/actors/src/protocol/messages.js'
import { makeNatsBus } from '../packages/actors/src/bus/nats-bus.js'
import { childRunRow } from '../packages/actors/src/protocol/child-contract.js'
import type { RunHandle } from '../packages/actors/src/supervisor/run-handle.js'
import { giveUpChild, handleChildDelivery } from '../packages/actors/src/worker/child-worker.js'
import { tempDir, waitFor } from './support/cli.js'
import { natsWorldPerTest } from './support/nats.js'
import { runCall } from './support/run-call.js'

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)

// Registered before the cleanups, so its streams are deleted after each bus has closed.
const natsWorld = natsWorldPerTest()
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const inProcess = async (): Promise<Bus> => makeInProcessBus({ ackWaitMs: 60_000 })

const nats = async (): Promise<Bus> => {
  const scope = await run(Scope.make())
  cleanups.push(() => run(Scope.close(scope, Exit.void)))
  return run(Scope.extend(makeNatsBus(natsWorld().busOptions(60_000)), scope))
}

describe.each([
  ['in-process', inProcess],
  ['nats', nats]
])('a worker on the %s bus', (_name, makeBus) => {
  it(`ends a child run failed with the cause once its handling died ${MAX_CHILD_HANDLING_FAILURES} times, and goes on serving the others`, async () => {
    const dir = tempDir()
    const store: Store = await openStore(path.join(dir, 'av.db'))
    cleanups.push(() => store.close())
    const contract = Agentvisor.contract({ goal: 'Write DONE into out.txt', workspace: dir, providers: [{ name: 'p', kind: 'scripted', steps: [] }] })
    const at = new Date().toISOString()
    await runCall(insertRun(store.db, childRunRow('parent', null, contract, at)))
    await runCall(insertRun(store.db, childRunRow('doomed', 'parent', contract, at)))
    await runCall(insertRun(store.db, childRunRow('fine', 'parent', contract, at)))
    const resumes: string[] = []
    // Resuming the doomed child dies (a bug in the driver, say); the other one runs.
    const resume = (runId: string): Effect.Effect<RunHandle> =>
      Effect.suspend(() => {
        resumes.push(runId)
        if (runId === 'doomed') return Effect.die(new Error('the driver exploded'))
        return Effect.succeed({
          runId,
          result: Effect.succeed({ runId, status: 'succeeded' as const, steps: 0, usage: { inputTokens: 0, outputTokens: 0 } }),
          cancel: Effect.void
        })
      })
    const bus = await makeBus()
    const lines: string[] = []
    const worker = await run(Scope.make())
    cleanups.push(() => run(Scope.close(worker, Exit.void)))
    await run(
      Scope.extend(
        bus.consumeChildren((delivery) => handleChildDelivery({ db: store.db, resume }, delivery), {
          concurrency: 1,
          log: (line) => lines.push(line),
          retryBaseMs: 10,
          giveUp: (request, cause) => giveUpChild(store.db, request, cause)
        }),
        worker
      )
    )
    await run(bus.submitChild({ v: PROTOCOL_VERSION, runId: 'doomed', parentId: 'parent', contract }))
    await run(bus.submitChild({ v: PROTOCOL_VERSION, runId: 'fine', parentId: 'parent', contract }))

    const doomed = await waitFor(async () => {
      const row = await runCall(getRun(store.db, 'doomed'))
      return row?.status === 'failed' ? row : undefined
    }, 'the doomed child to end failed')
    await waitFor(() => (resumes.includes('fine') ? true : undefined), 'the other child to be driven')

    expect(resumes.filter((id) => id === 'doomed')).toHaveLength(MAX_CHILD_HANDLING_FAILURES)
    expect(doomed.error).toEqual({
      kind: 'internal',
      message: `the worker gave this run up after its request failed ${MAX_CHILD_HANDLING_FAILURES} times: the driver exploded`
    })
    expect(doomed.state).toBe('finished.failed')
    expect(lines.filter((line) => line.startsWith('child run doomed: handling failed'))).toHaveLength(MAX_CHILD_HANDLING_FAILURES)
    expect(lines.at(-1)).toBe(`child run doomed: given up after ${MAX_CHILD_HANDLING_FAILURES} failed tries`)
  })
})
