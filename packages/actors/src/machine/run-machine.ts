import type { RunError, TaskContract } from '@agentvisor/core'
import { and, assign, setup } from 'xstate'

/** Why a dispatch happens: the first ask of a step, a retry after backoff, or the next provider of the chain. */
export type DispatchReason = 'initial' | 'retry' | 'fallover'

/** What the run machine starts from; every number is read from the validated contract. */
export interface RunMachineInput {
  readonly maxSteps: number
  readonly maxRetries: number
  readonly dispatchCeiling: number
  readonly providerCount: number
  readonly timeoutMs: number
}

/** The machine's input for a run of `contract`: a fresh run starts from it, a restored or replayed one is checked against it. */
export const machineInput = (contract: TaskContract): RunMachineInput => ({
  maxSteps: contract.limits.maxSteps,
  maxRetries: contract.limits.maxRetries,
  dispatchCeiling: contract.limits.dispatchCeiling,
  providerCount: contract.providers.length,
  timeoutMs: contract.limits.timeoutMs
})

/**
 * The machine's whole memory. It is small on purpose: the conversation lives in the steps table,
 * so a persisted snapshot stays a few hundred bytes however long the run gets.
 */
export interface RunContext extends RunMachineInput {
  /** The current step, 1-based: one model call and the tools it asked for. */
  readonly step: number
  /** Steps whose model call was answered. */
  readonly completedSteps: number
  /** Index in the fallback chain of the provider the next dispatch goes to. */
  readonly providerIndex: number
  /** Index of the next attempt within the current step (its receipt row). */
  readonly attempt: number
  readonly reason: DispatchReason
  /** Retries spent in the current step. */
  readonly retries: number
  /** Provider dispatches of the whole run, checked against the ceiling before each one. */
  readonly dispatches: number
  /** Epoch ms at which `retrying` dispatches again (persisted so a resume waits only the rest). */
  readonly retryAt: number | null
  /** Whether the last model answer asked for tools (verification without a contract needs it). */
  readonly lastHadToolCalls: boolean
  readonly error: RunError | null
  /** Set on entering `finished`: a finished run ignores every event. */
  readonly ended: boolean
  /** Whether this run started children: from then on it shares its tree's dispatch ceiling. */
  readonly spawnedChildren: boolean
}

export type RunEvent =
  | { readonly type: 'PROVIDER_OK'; readonly hasToolCalls: boolean }
  | { readonly type: 'PROVIDER_ERROR'; readonly error: RunError; readonly retryAt: number }
  /** The provider's circuit breaker is open: it is skipped without a call (no dispatch is spent). */
  | { readonly type: 'CIRCUIT_OPEN'; readonly error: RunError; readonly retryAt: number }
  /** A dispatch that was in flight when the driver died: settled `unknown`, sent again. */
  | { readonly type: 'DISPATCH_LOST' }
  | { readonly type: 'CEILING_REACHED'; readonly message?: string }
  | { readonly type: 'NEXT_PROVIDER' }
  | { readonly type: 'RETRY_DUE' }
  | { readonly type: 'TOOLS_DONE' }
  | { readonly type: 'APPROVAL_REQUESTED' }
  | { readonly type: 'APPROVALS_DECIDED' }
  | { readonly type: 'CHILDREN_SPAWNED' }
  | { readonly type: 'CHILDREN_DONE' }
  | { readonly type: 'VERIFY_PASSED' }
  | { readonly type: 'VERIFY_FAILED' }
  | { readonly type: 'CANCEL'; readonly message?: string }
  | { readonly type: 'TIMEOUT' }
  | { readonly type: 'FAIL'; readonly error: RunError }

export type RunEventType = RunEvent['type']

/**
 * Where a failed (or skipped) dispatch leads: a transient error moves along the chain without
 * spending a retry; with the chain exhausted the step starts again from the primary after a
 * backoff; auth and request errors, and transient ones past `maxRetries`, end the run.
 */
const failureTransitions = (count: 'countDispatch' | 'countSkip') =>
  [
    { guard: and(['isTransient', 'hasNextProvider']), target: 'fallingOver', actions: [count, 'recordError', 'nextProvider'] },
    { guard: and(['isTransient', 'hasRetryLeft']), target: 'retrying', actions: [count, 'recordError', 'scheduleRetry'] },
    { target: 'finished.failed', actions: [count, 'recordError'] }
  ] as const

/**
 * The run machine of docs/architecture.md. It is pure: it decides, it does no I/O. The supervisor
 * performs each state's entry work (a dispatch, the tools, a verification), persists the
 * transition, and only then sends the outcome as the next event, so every effect happens after
 * the transition that led to it is durable, and a resume simply re-enters the restored state.
 */
export const runMachine = setup({
  types: {
    context: {} as RunContext,
    events: {} as RunEvent,
    input: {} as RunMachineInput
  },
  guards: {
    isTransient: ({ event }) => (event.type === 'PROVIDER_ERROR' || event.type === 'CIRCUIT_OPEN') && event.error.kind === 'transient',
    hasNextProvider: ({ context }) => context.providerIndex + 1 < context.providerCount,
    hasRetryLeft: ({ context }) => context.retries < context.maxRetries,
    hasToolCalls: ({ event }) => event.type === 'PROVIDER_OK' && event.hasToolCalls,
    atStepCap: ({ context }) => context.step >= context.maxSteps,
    isActive: ({ context }) => !context.ended
  },
  actions: {
    /** Every answered, failed or lost dispatch counts against the ceiling and opens the next receipt row. */
    countDispatch: assign({
      dispatches: ({ context }) => context.dispatches + 1,
      attempt: ({ context }) => context.attempt + 1
    }),
    /** A skipped provider still gets a receipt row, but spends no dispatch. */
    countSkip: assign({ attempt: ({ context }) => context.attempt + 1 }),
    nextProvider: assign({ providerIndex: ({ context }) => context.providerIndex + 1, reason: 'fallover' }),
    scheduleRetry: assign({
      retryAt: ({ event }) => (event.type === 'PROVIDER_ERROR' || event.type === 'CIRCUIT_OPEN' ? event.retryAt : null)
    }),
    recordError: assign({
      error: ({ event, context }) => (event.type === 'PROVIDER_ERROR' || event.type === 'CIRCUIT_OPEN' || event.type === 'FAIL' ? event.error : context.error)
    })
  }
}).createMachine({
  id: 'run',
  initial: 'dispatching',
  context: ({ input }) => ({
    ...input,
    step: 1,
    completedSteps: 0,
    providerIndex: 0,
    attempt: 0,
    reason: 'initial',
    retries: 0,
    dispatches: 0,
    retryAt: null,
    lastHadToolCalls: false,
    error: null,
    ended: false,
    spawnedChildren: false
  }),
  on: {
    CANCEL: {
      guard: 'isActive',
      target: '.finished.cancelled',
      actions: assign({
        error: ({ event }) =>
          ({ kind: 'cancelled', message: event.type === 'CANCEL' && event.message !== undefined ? event.message : 'run cancelled' }) as RunError
      })
    },
    TIMEOUT: {
      guard: 'isActive',
      target: '.finished.timedOut',
      actions: assign({ error: ({ context }) => ({ kind: 'timeout', message: `run exceeded its timeout of ${context.timeoutMs} ms` }) as RunError })
    },
    FAIL: { guard: 'isActive', target: '.finished.failed', actions: 'recordError' }
  },
  states: {
    dispatching: {
      on: {
        PROVIDER_OK: [
          {
            guard: 'hasToolCalls',
            target: 'acting',
            actions: ['countDispatch', assign({ completedSteps: ({ context }) => context.completedSteps + 1, lastHadToolCalls: true, error: null })]
          },
          {
            target: 'verifying',
            actions: ['countDispatch', assign({ completedSteps: ({ context }) => context.completedSteps + 1, lastHadToolCalls: false, error: null })]
          }
        ],
        PROVIDER_ERROR: failureTransitions('countDispatch'),
        CIRCUIT_OPEN: failureTransitions('countSkip'),
        DISPATCH_LOST: { target: 'dispatching', reenter: true, actions: ['countDispatch', assign({ reason: 'retry' })] },
        CEILING_REACHED: {
          target: 'finished.failed',
          actions: assign({
            error: ({ context, event }) =>
              ({
                kind: 'ceiling',
                message:
                  event.type === 'CEILING_REACHED' && event.message !== undefined ? event.message : `dispatch ceiling of ${context.dispatchCeiling} exhausted`
              }) as RunError
          })
        }
      }
    },
    fallingOver: {
      // The supervisor's entry work here picks the next provider of the chain (circuit breakers skip).
      on: { NEXT_PROVIDER: 'dispatching' }
    },
    retrying: {
      on: {
        RETRY_DUE: {
          target: 'dispatching',
          actions: assign({ providerIndex: 0, reason: 'retry', retries: ({ context }) => context.retries + 1, retryAt: null })
        }
      }
    },
    awaitingApproval: {
      on: { APPROVALS_DECIDED: 'acting' }
    },
    acting: {
      on: {
        TOOLS_DONE: 'verifying',
        APPROVAL_REQUESTED: 'awaitingApproval',
        CHILDREN_SPAWNED: { target: 'awaitingChildren', actions: assign({ spawnedChildren: true }) }
      }
    },
    awaitingChildren: {
      on: { CHILDREN_DONE: 'acting' }
    },
    verifying: {
      on: {
        VERIFY_PASSED: 'finished.succeeded',
        VERIFY_FAILED: [
          { guard: 'atStepCap', target: 'finished.stepCapReached' },
          {
            target: 'dispatching',
            actions: assign({
              step: ({ context }) => context.step + 1,
              providerIndex: 0,
              attempt: 0,
              reason: 'initial',
              retries: 0,
              error: null
            })
          }
        ]
      }
    },
    finished: {
      // Nothing leaves a finished run: `ended` switches off the root-level CANCEL/TIMEOUT/FAIL.
      entry: assign({ ended: true }),
      // Required by XState for a compound state; every transition here names its final child.
      initial: 'failed',
      states: {
        succeeded: { type: 'final' },
        stepCapReached: { type: 'final' },
        failed: { type: 'final' },
        cancelled: { type: 'final' },
        timedOut: { type: 'final' }
      }
    }
  }
})
