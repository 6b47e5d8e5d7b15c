import { describe, expect, it } from 'vitest'
import { createActor } from 'xstate'
import { type RunEvent, runMachine, statePath, statusOfState } from '@agentvisor/actors'

const input = { maxSteps: 3, maxRetries: 1, dispatchCeiling: 10, providerCount: 2, timeoutMs: 1000 }

const play = (events: RunEvent[], overrides: Partial<typeof input> = {}) => {
  const actor = createActor(runMachine, { input: { ...input, ...overrides } }).start()
  const paths = [statePath(actor.getSnapshot().value)]
  for (const event of events) {
    actor.send(event)
    paths.push(statePath(actor.getSnapshot().value))
  }
  return { paths, context: actor.getSnapshot().context }
}

const transient = { type: 'PROVIDER_ERROR', error: { kind: 'transient', message: '503', httpStatus: 503 }, retryAt: 0 } as const
const auth = { type: 'PROVIDER_ERROR', error: { kind: 'auth', message: '401', httpStatus: 401, provider: 'p' }, retryAt: 0 } as const

describe('the run machine', () => {
  it('goes dispatching, acting, verifying, finished.succeeded on the happy path', () => {
    const { paths, context } = play([{ type: 'PROVIDER_OK', hasToolCalls: true }, { type: 'TOOLS_DONE' }, { type: 'VERIFY_PASSED' }])
    expect(paths).toEqual(['dispatching', 'acting', 'verifying', 'finished.succeeded'])
    expect(context).toMatchObject({ completedSteps: 1, dispatches: 1, error: null })
  })

  it('skips acting when the model asks for no tools', () => {
    expect(play([{ type: 'PROVIDER_OK', hasToolCalls: false }]).paths).toEqual(['dispatching', 'verifying'])
  })

  it('falls over to the next provider on a transient error without spending a retry', () => {
    const { paths, context } = play([transient, { type: 'NEXT_PROVIDER' }])
    expect(paths).toEqual(['dispatching', 'fallingOver', 'dispatching'])
    expect(context).toMatchObject({ providerIndex: 1, retries: 0, reason: 'fallover', attempt: 1, dispatches: 1 })
  })

  it('retries from the primary once the chain is exhausted, then fails transient', () => {
    const { paths, context } = play([transient, { type: 'NEXT_PROVIDER' }, transient, { type: 'RETRY_DUE' }, transient, { type: 'NEXT_PROVIDER' }, transient])
    expect(paths).toEqual(['dispatching', 'fallingOver', 'dispatching', 'retrying', 'dispatching', 'fallingOver', 'dispatching', 'finished.failed'])
    expect(context).toMatchObject({ retries: 1, dispatches: 4, error: { kind: 'transient' } })
  })

  it('never falls over or retries on an auth error and keeps its status', () => {
    const { paths, context } = play([auth])
    expect(paths).toEqual(['dispatching', 'finished.failed'])
    expect(context.error).toEqual(auth.error)
  })

  it('fails closed with kind ceiling when the dispatch ceiling is reached', () => {
    const { paths, context } = play([{ type: 'CEILING_REACHED' }], { dispatchCeiling: 7 })
    expect(paths.at(-1)).toBe('finished.failed')
    expect(context.error).toEqual({ kind: 'ceiling', message: 'dispatch ceiling of 7 exhausted' })
  })

  it('starts the next step after a failed verification and stops at the step cap', () => {
    const step = [{ type: 'PROVIDER_OK', hasToolCalls: false }, { type: 'VERIFY_FAILED' }] as const
    const { paths, context } = play([...step, ...step, ...step], { maxSteps: 2 })
    expect(paths).toEqual([
      'dispatching',
      'verifying',
      'dispatching',
      'verifying',
      'finished.stepCapReached',
      'finished.stepCapReached',
      'finished.stepCapReached'
    ])
    expect(context.step).toBe(2)
    expect(statusOfState('finished.stepCapReached')).toBe('step_cap')
  })

  it('ignores every event once finished', () => {
    const { paths, context } = play([{ type: 'CANCEL' }, { type: 'TIMEOUT' }, { type: 'FAIL', error: { kind: 'internal', message: 'x' } }])
    expect(paths).toEqual(['dispatching', 'finished.cancelled', 'finished.cancelled', 'finished.cancelled'])
    expect(context.error).toEqual({ kind: 'cancelled', message: 'run cancelled' })
  })
})
