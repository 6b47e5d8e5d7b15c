import {
  type ChatMessage,
  type ChatReply,
  type Provider,
  type ProviderConfig,
  ProviderError,
  type RunError,
  type ToolCall,
  retryDelayMs,
  runErrorFromProvider
} from '@agentvisor/core'
import {
  type AttemptSettlement,
  countTreeDispatches,
  type LeaseLostError,
  type NewAttempt,
  type NewStep,
  type RunWrite,
  type StoreError
} from '@agentvisor/store'
import { Cause, Effect, Either, Exit, Option } from 'effect'
import type { RunContext } from '../machine/run-machine.js'
import { type Admission, type CallOutcome, circuitKey } from './circuit-breaker.js'
import { stepMessages, summarizePrompt } from './conversation.js'
import { attemptWithin } from './deadline.js'
import { iso, later, type Now, thenNow } from './now.js'
import { type AttemptSettled, listens, notify } from './run-observer.js'
import { type TextRelay, textRelay } from './text-relay.js'
import { describeElisions, type Elision, fitToContext } from './context-window.js'
import { attemptKey, type BudgetSubject, ownSpending, passedBound, promptTokens, type RunBudget, reservationOf } from './budget.js'
import type { Drive } from './drive.js'
import type { Work } from './transition-journal.js'

/**
 * `dispatching`'s entry work: the model call and its receipt. The checks before it (the run's
 * ceiling, the tree's) are pure, so the transition into `dispatching` is staged; the receipt
 * row is staged with it and all of it made durable before the call goes out, so a crash during
 * the call leaves a `pending` receipt that recovery.ts settles `unknown`. The answer (or error)
 * settles the receipt in the commit of the transition it causes.
 */
export const dispatch = (drive: Drive, ctx: RunContext): Now<Work, StoreError | LeaseLostError> => {
  const { deps } = drive
  const { contract, runId } = deps
  if (ctx.dispatches >= ctx.dispatchCeiling) return CEILING
  // In a tree the ceiling is shared: every run counts the dispatches of all of them.
  const tree = contract.lineage ?? (ctx.spawnedChildren ? { rootId: runId, treeDispatchCeiling: contract.limits.dispatchCeiling } : undefined)
  if (tree === undefined) return guardedSend(drive, ctx)
  return Effect.flatMap(countTreeDispatches(deps.db, tree.rootId), (used) =>
    used >= tree.treeDispatchCeiling
      ? Effect.succeed<Work>({ event: { type: 'CEILING_REACHED', message: `dispatch ceiling of ${tree.treeDispatchCeiling} exhausted by the run tree` } })
      : later(guardedSend(drive, ctx))
  )
}

const CEILING: Work = { event: { type: 'CEILING_REACHED' } }

/** The call, held against the run's budgets first when it has any. */
const guardedSend = (drive: Drive, ctx: RunContext): Now<Work, StoreError | LeaseLostError> => {
  const budget = drive.budget
  if (budget === undefined) return thenNow(openReceipt(drive, ctx), (call) => ('event' in call ? call : send(drive, ctx, call)))
  return Effect.flatMap(drive.deps.budgets.locked(budget.rootId, withinBudget(drive, ctx, budget)), (call) =>
    later('event' in call ? call : send(drive, ctx, call))
  )
}

/**
 * The budget check and the receipt, under the tree's lock (budget.ts): the run's own spending is
 * in memory; the tree's is read from the store only when the run is part of a tree. The receipt is
 * durable before the lock is let go, so the next check of the tree sees this call in flight.
 */
const withinBudget = (drive: Drive, ctx: RunContext, budget: RunBudget): Effect.Effect<Call | Work, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    const { deps } = drive
    drive.toolsChars ??= JSON.stringify(drive.offeredTools).length
    const claim = reservationOf(deps.contract, drive.prices[ctx.providerIndex], promptTokens(deps.messages, drive.toolsChars))
    const inTree = deps.contract.lineage !== undefined || ctx.spawnedChildren
    const own = ownSpending(deps.usage.usage)
    const treeSpent = inTree ? yield* deps.budgets.spent(deps.db, budget.rootId) : own
    const passed =
      passedBound(budget.tree, treeSpent, claim, deps.contract.lineage !== undefined ? TREE : inTree ? ROOT : ALONE) ?? passedBound(budget.own, own, claim, OWN)
    if (passed !== undefined) return { event: { type: 'BUDGET_REACHED', message: passed } } satisfies Work
    const call = yield* later(openReceipt(drive, ctx))
    if ('event' in call) return call
    deps.budgets.reserve(budget.rootId, attemptKey(deps.runId, ctx.step, ctx.attempt), claim)
    return call
  })

/** Whose bound a refusal names (budget.ts `passedBound`): the run alone's, its tree's (the root's limits), a child's own. */
const ALONE: BudgetSubject = { whose: 'the run', setting: (limit) => `limits.${limit}` }
const ROOT: BudgetSubject = { whose: 'the run tree', setting: (limit) => `limits.${limit}` }
const TREE: BudgetSubject = { whose: 'the run tree', setting: (limit) => `limits.${limit} of the tree's root` }
const OWN: BudgetSubject = { whose: 'this run', setting: (limit) => `limits.${limit} of this run's agent or spawn_child call` }

/** The receipt, durable with everything staged before it: what the call is sent with (or why it is not). */
const openReceipt = (drive: Drive, ctx: RunContext): Now<Call | Work, StoreError | LeaseLostError> => {
  const { deps, journal } = drive
  const provider = deps.providers[ctx.providerIndex]!
  const config = deps.contract.providers[ctx.providerIndex]!
  const startedAt = drive.now()
  const key = circuitKey(config)
  const admission = deps.breakers.admit(key, startedAt)
  if (admission === 'open') return skipOpenCircuit(drive, ctx, provider.name, startedAt)
  journal.stageWrite({ op: 'insertAttempt', row: pendingAttempt(deps.runId, ctx, provider.name, startedAt) })
  const limit = deps.contract.limits.contextTokens
  if (limit !== undefined) drive.toolsChars ??= JSON.stringify(drive.offeredTools).length
  const fitted = limit === undefined ? undefined : fitToContext(deps.messages, limit, drive.toolsChars ?? 0)
  const call: Call = { messages: fitted?.messages ?? deps.messages, elided: fitted?.elided ?? [], provider, config, key, admission, startedAt }
  return thenNow(journal.flushNow(), () => call)
}

interface Call {
  /** What the request sends: the conversation, or it fitted to `contextTokens`. */
  readonly messages: ReadonlyArray<ChatMessage>
  /** The tool results left out of it (recorded with the step's prompt summary). */
  readonly elided: ReadonlyArray<Elision>
  readonly provider: Provider
  readonly config: ProviderConfig
  readonly key: string
  readonly admission: Admission
  readonly startedAt: number
}

/**
 * The call itself. A provider that answers at once (an `Exit`: the scripted provider without a
 * delay) costs no fiber and no timer; any other answer is awaited under the attempt deadline.
 */
const send = (drive: Drive, ctx: RunContext, call: Call): Now<Work> => {
  const { deps } = drive
  const { runId, observers } = deps
  if (listens(observers, 'onDispatch'))
    notify(observers, 'onDispatch', { runId, step: ctx.step, attempt: ctx.attempt, provider: call.provider.name, reason: ctx.reason })
  // The live conversation, not a copy: the driver only appends to it once the answer is in. With
  // `contextTokens`, a copy with the oldest tool results elided when it would not fit.
  // Where the provider stands in this run, durable across pauses and processes (ChatRequest.dispatch).
  const dispatch = drive.dispatched[ctx.providerIndex] ?? 0
  drive.dispatched[ctx.providerIndex] = dispatch + 1
  const request = { messages: call.messages, tools: drive.offeredTools, step: ctx.step, dispatch }
  const relay = textRelay(drive, ctx)
  if (relay === undefined) return answered(drive, ctx, call, call.provider.chat(request), undefined)
  return answered(drive, ctx, call, call.provider.chat({ ...request, onText: relay.onText }), relay)
}

/**
 * The call's answer (at once, or awaited under the attempt deadline) made the step's work. The
 * relay's text still held, or the whole answer of a call that did not stream, goes out as the
 * answer is settled: before the answer's transition.
 */
const answered = (drive: Drive, ctx: RunContext, call: Call, answer: Effect.Effect<ChatReply, ProviderError>, relay: TextRelay | undefined): Now<Work> => {
  const { deps, journal } = drive
  const { runId, observers } = deps
  const { provider, config, key, admission, startedAt } = call
  if (Exit.isExit(answer)) {
    const exit = answer as Exit.Exit<ChatReply, ProviderError>
    if (Exit.isSuccess(exit)) return settled(drive, ctx, call, Either.right(exit.value), relay)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) return settled(drive, ctx, call, Either.left(failure.value), relay)
  }
  const deadlineMs = config.attemptTimeoutMs ?? deps.attemptTimeoutMs
  return Effect.map(
    attemptWithin(
      answer,
      deadlineMs,
      () =>
        new ProviderError({
          kind: 'transient',
          provider: provider.name,
          possiblyDelivered: true,
          message: `no answer within the attempt deadline of ${deadlineMs} ms`
        }),
      // A cancel or timeout aborts the call (the adapter's AbortSignal); the receipt says so.
      Effect.suspend(() => {
        const end = drive.now()
        deps.breakers.record(key, admission, 'abandoned', end)
        notify(observers, 'onAttemptSettled', { ...attemptOf(drive, ctx), outcome: 'cancelled', latencyMs: end - startedAt })
        return journal.write(settle(runId, ctx, { outcome: 'cancelled', settled_at: iso(end), latency_ms: end - startedAt })).pipe(
          Effect.ignore,
          Effect.tap(() => releaseReservation(drive, ctx))
        )
      })
    ),
    (outcome) => settled(drive, ctx, call, outcome, relay)
  )
}

/** What the call's outcome makes of the step: the event, the receipt's settlement, the step row. */
const settled = (drive: Drive, ctx: RunContext, call: Call, outcome: Either.Either<ChatReply, ProviderError>, relay: TextRelay | undefined): Work => {
  const settledAt = drive.now()
  drive.deps.breakers.record(call.key, call.admission, outcomeForBreaker(outcome._tag === 'Left' ? outcome.left : undefined), settledAt)
  if (outcome._tag === 'Left') {
    relay?.flush()
    return failedWork(drive, ctx, call, redactedError(drive, outcome.left), settledAt)
  }
  const reply = redactedReply(drive, outcome.right)
  relay?.flush(reply.text)
  return answeredWork(drive, ctx, call, reply, settledAt)
}

/** A call that failed: the provider's error, to be retried or fallen over from, and its receipt settled `failed` (or `unknown`). */
const failedWork = (drive: Drive, ctx: RunContext, call: Call, error: ProviderError, settledAt: number): Work => {
  const { deps } = drive
  const { runId, observers } = deps
  const latency = settledAt - call.startedAt
  return {
    event: {
      type: 'PROVIDER_ERROR',
      error: runErrorFromProvider(error),
      retryAt: settledAt + retryDelayMs(deps.retryPolicy, ctx.retries, error.retryAfterMs)
    },
    writes: [
      settle(runId, ctx, {
        outcome: error.possiblyDelivered === true ? 'unknown' : 'failed',
        settled_at: iso(settledAt),
        error_kind: error.kind,
        http_status: error.httpStatus ?? null,
        error_message: error.message,
        latency_ms: latency,
        partial_text: error.partialText ?? null
      })
    ],
    notice: () => {
      releaseReservation(drive, ctx)
      notify(observers, 'onAttemptSettled', {
        ...attemptOf(drive, ctx),
        outcome: error.possiblyDelivered === true ? 'unknown' : 'failed',
        errorKind: error.kind,
        httpStatus: error.httpStatus,
        latencyMs: latency
      })
    }
  } satisfies Work
}

/** A model's answer: its receipt settled `ok`, its step row, and (once durable) the answer in the conversation. */
const answeredWork = (drive: Drive, ctx: RunContext, call: Call, reply: ChatReply, settledAt: number): Work => {
  const { deps } = drive
  const { runId, observers } = deps
  const latency = settledAt - call.startedAt
  const step = { text: reply.text, toolCalls: reply.toolCalls }
  const at = iso(settledAt)
  return {
    event: { type: 'PROVIDER_OK', hasToolCalls: reply.toolCalls.length > 0 },
    writes: [
      settle(runId, ctx, {
        outcome: 'ok',
        settled_at: at,
        latency_ms: latency,
        ttft_ms: reply.timeToFirstTokenMs ?? null,
        tokens_in: reply.usage?.inputTokens ?? null,
        tokens_out: reply.usage?.outputTokens ?? null
      }),
      { op: 'insertStep', row: stepRow(drive, ctx, call, reply, at) }
    ],
    after: () => {
      if (reply.usage !== undefined) deps.usage.add(drive.prices[ctx.providerIndex], reply.usage.inputTokens, reply.usage.outputTokens)
      deps.messages.push(...stepMessages(step))
      drive.toolCalls = reply.toolCalls
      // Nobody can have decided or journalled anything for this step yet (tool-execution.ts).
      drive.freshStep = ctx.step
    },
    notice: !listens(observers, 'onAttemptSettled')
      ? drive.budget === undefined
        ? undefined
        : () => releaseReservation(drive, ctx)
      : () => {
          releaseReservation(drive, ctx)
          notify(observers, 'onAttemptSettled', {
            ...attemptOf(drive, ctx),
            outcome: 'ok',
            latencyMs: latency,
            ttftMs: reply.timeToFirstTokenMs,
            tokensIn: reply.usage?.inputTokens,
            tokensOut: reply.usage?.outputTokens
          })
        }
  } satisfies Work
}

/** The step row of an answer: what was asked (summarised, with what was elided to fit) and what came back. */
const stepRow = (drive: Drive, ctx: RunContext, call: Call, reply: ChatReply, at: string): NewStep => {
  const { runId, messages } = drive.deps
  return {
    run_id: runId,
    step: ctx.step,
    provider: call.provider.name,
    prompt_summary: call.elided.length === 0 ? summarizePrompt(messages) : summarizePrompt(messages) + describeElisions(call.elided),
    text: reply.text,
    tool_calls_json: JSON.stringify(reply.toolCalls),
    results_json: null,
    tokens_in: reply.usage?.inputTokens ?? 0,
    tokens_out: reply.usage?.outputTokens ?? 0,
    at
  }
}

/** A settled call's reservation goes once its settlement is durable (budget.ts); nothing for a run without a budget. */
const releaseReservation = (drive: Drive, ctx: RunContext): void => {
  const budget = drive.budget
  if (budget !== undefined) drive.deps.budgets.release(budget.rootId, attemptKey(drive.deps.runId, ctx.step, ctx.attempt))
}

/** `fallingOver`'s entry work: pure, so staged; the next dispatch's admission skips open circuits. */
export const nextProvider: Work = { event: { type: 'NEXT_PROVIDER' } }

const outcomeForBreaker = (error: ProviderError | undefined): CallOutcome =>
  error === undefined ? 'success' : error.kind === 'transient' ? 'transient' : 'other'

/** What a receipt row of the current attempt says about itself, for `onAttemptSettled`. */
const attemptOf = (drive: Drive, ctx: RunContext): Omit<AttemptSettled, 'outcome' | 'latencyMs'> => {
  const config = drive.deps.contract.providers[ctx.providerIndex]!
  return {
    runId: drive.deps.runId,
    step: ctx.step,
    attempt: ctx.attempt,
    provider: config.name,
    providerKind: config.kind,
    model: config.model,
    reason: ctx.reason
  }
}

/** A provider's error as the run keeps it: message and partial output redacted (any `Provider`, not only ours). */
const redactedError = (drive: Drive, error: ProviderError): ProviderError => {
  const secrets = drive.deps.secrets
  if (secrets === undefined || secrets.isEmpty) return error
  const message = secrets.redact(error.message)
  const partialText = error.partialText === undefined ? undefined : secrets.redact(error.partialText)
  if (message === error.message && partialText === error.partialText) return error
  const { kind, provider, httpStatus, retryAfterMs, possiblyDelivered, cause } = error
  return new ProviderError({ kind, provider, httpStatus, retryAfterMs, possiblyDelivered, cause, message, partialText })
}

/** A model's answer as the run keeps it: a model can repeat whatever it was shown. */
const redactedReply = <R extends { readonly text: string; readonly toolCalls: ReadonlyArray<ToolCall> }>(drive: Drive, reply: R): R => {
  const secrets = drive.deps.secrets
  if (secrets === undefined || secrets.isEmpty) return reply
  const text = secrets.redact(reply.text)
  let changed = text !== reply.text
  const toolCalls = reply.toolCalls.map((call) => {
    const args = secrets.redact(call.arguments)
    if (args === call.arguments) return call
    changed = true
    return { ...call, arguments: args }
  })
  return changed ? { ...reply, text, toolCalls } : reply
}

/** Settles the receipt of the context's current attempt. */
const settle = (runId: string, ctx: RunContext, patch: AttemptSettlement): RunWrite => ({
  op: 'settleAttempt',
  runId,
  step: ctx.step,
  attempt: ctx.attempt,
  patch
})

/** The receipt row of an attempt about to be made: nothing known yet but who and why. */
const pendingAttempt = (runId: string, ctx: RunContext, provider: string, startedAt: number): NewAttempt => ({
  run_id: runId,
  step: ctx.step,
  attempt: ctx.attempt,
  provider,
  reason: ctx.reason,
  error_kind: null,
  http_status: null,
  error_message: null,
  latency_ms: null,
  ttft_ms: null,
  tokens_in: null,
  tokens_out: null,
  partial_text: null,
  started_at: iso(startedAt)
})

/** A provider whose circuit is open is skipped without a call; its receipt row says why. */
const skipOpenCircuit = (drive: Drive, ctx: RunContext, provider: string, at: number): Work => {
  const { runId, observers, retryPolicy } = drive.deps
  const error: RunError = { kind: 'transient', message: 'circuit open', provider }
  return {
    event: { type: 'CIRCUIT_OPEN', error, retryAt: at + retryDelayMs(retryPolicy, ctx.retries, undefined) },
    writes: [
      { op: 'insertAttempt', row: pendingAttempt(runId, ctx, provider, at) },
      settle(runId, ctx, { outcome: 'failed', settled_at: iso(at), error_kind: 'transient', error_message: 'circuit open', latency_ms: 0 })
    ],
    notice: () => notify(observers, 'onAttemptSettled', { ...attemptOf(drive, ctx), outcome: 'failed', errorKind: 'transient', latencyMs: 0 })
  }
}
