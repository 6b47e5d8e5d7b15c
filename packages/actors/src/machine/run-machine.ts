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
  /**
   * Set by a follow-up (docs/policy.md, "Follow-ups"): the steps answered before the current turn
   * began (its step cap counts from there) and when it began (its timeout counts from then).
   * Absent for a run of one turn, and then written nowhere.
   */
  readonly turnStart?: number | undefined
  readonly turnAt?: number | undefined
}

export type RunEvent =
  | { readonly type: 'PROVIDER_OK'; readonly hasToolCalls: boolean }
  | { readonly type: 'PROVIDER_ERROR'; readonly error: RunError; readonly retryAt: number }
  /** The provider's circuit breaker is open: it is skipped without a call (no dispatch is spent). */
  | { readonly type: 'CIRCUIT_OPEN'; readonly error: RunError; readonly retryAt: number }
  /** A dispatch that was in flight when the driver died: settled `unknown`, sent again. */
  | { readonly type: 'DISPATCH_LOST' }
  | { readonly type: 'CEILING_REACHED'; readonly message?: string }
  /** The call about to be sent could pass a token or dollar budget (docs/task-file.md, "Usage and budgets"). */
  | { readonly type: 'BUDGET_REACHED'; readonly message: string }
  | { readonly type: 'NEXT_PROVIDER' }
  | { readonly type: 'RETRY_DUE' }
  | { readonly type: 'TOOLS_DONE' }
  | { readonly type: 'APPROVAL_REQUESTED' }
  | { readonly type: 'APPROVALS_DECIDED' }
  /** A person continues a finished run with a new message: a new turn (`agentvisor send`). */
  | { readonly type: 'FOLLOW_UP'; readonly at: number; readonly text: string }
  /** The step asked a person a question (`ask_human`): the run pauses for the answer. */
  | { readonly type: 'INPUT_REQUESTED' }
  | { readonly type: 'INPUT_ANSWERED' }
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
 * backoff; auth and request errors, and transient ones past `maxRetries`, end the run. A failed
 * call counts against the dispatch ceiling (`dispatched`); a provider skipped for its open
 * circuit does not, but still gets a receipt row.
 */
const failureTransitions = (dispatched: boolean) =>
  [
    { guard: and(['isTransient', 'hasNextProvider']), target: 'fallingOver', actions: { type: 'fallOver', params: { dispatched } } },
    { guard: and(['isTransient', 'hasRetryLeft']), target: 'retrying', actions: { type: 'scheduleRetry', params: { dispatched } } },
    { target: 'finished.failed', actions: { type: 'giveUp', params: { dispatched } } }
  ] as const

/** Whether a failed or skipped dispatch failed for a reason that may pass (a 503, a timeout, an open circuit). */
const isTransientFailure = (event: RunEvent): boolean => (event.type === 'PROVIDER_ERROR' || event.type === 'CIRCUIT_OPEN') && event.error.kind === 'transient'

/** The error a failure event carries (the context's own for any other event). */
const errorOf = (event: RunEvent, context: RunContext): RunError | null =>
  event.type === 'PROVIDER_ERROR' || event.type === 'CIRCUIT_OPEN' || event.type === 'FAIL' ? event.error : context.error

/**
 * The run machine of docs/architecture.md. It is pure: it decides, it does no I/O. The supervisor
 * performs each state's entry work (a dispatch, the tools, a verification), persists the
 * transition, and only then sends the outcome as the next event, so every effect happens after
 * the transition that led to it is durable, and a resume simply re-enters the restored state.
 *
 * Every transition has at most one `assign`: XState copies the whole context and rebuilds the
 * snapshot for each assign, and the driver sends two or three events a step (docs/architecture.md,
 * "The hot path"). The guards keep their names, combinators included: the inspector's chart shows
 * them (docs/inspector.md); only a failed dispatch evaluates a combinator.
 */
export const runMachine = setup({
  types: {
    context: {} as RunContext,
    events: {} as RunEvent,
    input: {} as RunMachineInput
  },
  guards: {
    isTransient: ({ event }) => isTransientFailure(event),
    hasNextProvider: ({ context }) => context.providerIndex + 1 < context.providerCount,
    hasRetryLeft: ({ context }) => context.retries < context.maxRetries,
    hasToolCalls: ({ event }) => event.type === 'PROVIDER_OK' && event.hasToolCalls,
    atStepCap: ({ context }) => context.step - (context.turnStart ?? 0) >= context.maxSteps,
    isActive: ({ context }) => !context.ended
  },
  actions: {
    /**
     * The model answered: the dispatch counts against the ceiling, the next attempt gets the
     * next receipt row, and the step is answered.
     */
    recordAnswer: assign(({ context, event }) => ({
      dispatches: context.dispatches + 1,
      attempt: context.attempt + 1,
      completedSteps: context.completedSteps + 1,
      lastHadToolCalls: event.type === 'PROVIDER_OK' && event.hasToolCalls,
      error: null
    })),
    /** A transient failure moves to the next provider of the chain. */
    fallOver: assign(({ context, event }, params: { readonly dispatched: boolean }) => ({
      dispatches: params.dispatched ? context.dispatches + 1 : context.dispatches,
      attempt: context.attempt + 1,
      error: errorOf(event, context),
      providerIndex: context.providerIndex + 1,
      reason: 'fallover' as const
    })),
    /** A transient failure with the chain exhausted waits until `retryAt`. */
    scheduleRetry: assign(({ context, event }, params: { readonly dispatched: boolean }) => ({
      dispatches: params.dispatched ? context.dispatches + 1 : context.dispatches,
      attempt: context.attempt + 1,
      error: errorOf(event, context),
      retryAt: event.type === 'PROVIDER_ERROR' || event.type === 'CIRCUIT_OPEN' ? event.retryAt : null
    })),
    /** Any other failure ends the run with it. */
    giveUp: assign(({ context, event }, params: { readonly dispatched: boolean }) => ({
      dispatches: params.dispatched ? context.dispatches + 1 : context.dispatches,
      attempt: context.attempt + 1,
      error: errorOf(event, context)
    })),
    recordError: assign(({ context, event }) => ({ error: errorOf(event, context) }))
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
          { guard: 'hasToolCalls', target: 'acting', actions: 'recordAnswer' },
          { target: 'verifying', actions: 'recordAnswer' }
        ],
        PROVIDER_ERROR: failureTransitions(true),
        CIRCUIT_OPEN: failureTransitions(false),
        DISPATCH_LOST: {
          target: 'dispatching',
          reenter: true,
          actions: assign(({ context }) => ({ dispatches: context.dispatches + 1, attempt: context.attempt + 1, reason: 'retry' as const }))
        },
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
        },
        BUDGET_REACHED: {
          target: 'finished.failed',
          actions: assign({
            error: ({ event }) => ({ kind: 'budget', message: event.type === 'BUDGET_REACHED' ? event.message : 'budget exhausted' }) as RunError
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
          actions: assign(({ context }) => ({ providerIndex: 0, reason: 'retry' as const, retries: context.retries + 1, retryAt: null }))
        }
      }
    },
    awaitingApproval: {
      on: { APPROVALS_DECIDED: 'acting' }
    },
    awaitingInput: {
      // A question the model asked (`ask_human`) waits for a person; answered, the step runs on.
      on: { INPUT_ANSWERED: 'acting' }
    },
    acting: {
      on: {
        TOOLS_DONE: 'verifying',
        APPROVAL_REQUESTED: 'awaitingApproval',
        INPUT_REQUESTED: 'awaitingInput',
        CHILDREN_SPAWNED: { target: 'awaitingChildren', actions: assign(() => ({ spawnedChildren: true })) }
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
            actions: assign(({ context }) => ({ step: context.step + 1, providerIndex: 0, attempt: 0, reason: 'initial' as const, retries: 0, error: null }))
          }
        ]
      }
    },
    finished: {
      // Nothing leaves a finished run but a follow-up, which begins a new turn: `ended` switches
      // off the root-level CANCEL/TIMEOUT/FAIL until then.
      entry: assign(() => ({ ended: true })),
      on: {
        FOLLOW_UP: {
          target: 'dispatching',
          actions: assign(({ context, event }) => ({
            ended: false,
            error: null,
            step: context.completedSteps + 1,
            attempt: 0,
            providerIndex: 0,
            reason: 'initial' as const,
            retries: 0,
            retryAt: null,
            lastHadToolCalls: false,
            turnStart: context.completedSteps,
            turnAt: event.at
          }))
        }
      },
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
