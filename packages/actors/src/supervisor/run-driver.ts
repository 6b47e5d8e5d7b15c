import {
  type CompiledPolicy,
  type ChatMessage,
  type CommandSettings,
  type Provider,
  ProviderError,
  type RetryPolicy,
  type RunError,
  type SecretSet,
  type TaskContract,
  type ToolCall,
  type Workspace,
  retryDelayMs,
  runErrorFromProvider,
  runCommandSettings,
  runTool,
  verify,
  verifyRunsCommands,
  SPAWN_CHILD_TOOL,
  WORKSPACE_TOOLS
} from '@agentvisor/core'
import {
  type Database,
  type LeaseLostError,
  countTreeDispatches,
  type ApprovalRow,
  type AttemptSettlement,
  type NewApproval,
  type NewAttempt,
  type NewPolicyEvent,
  type NewTransition,
  type RunHead,
  type RunWrite,
  type RunWriter,
  type StoreError
} from '@agentvisor/store'
import { Duration, Effect } from 'effect'
import type { Kysely } from 'kysely'
import type { Actor } from 'xstate'
import { type ApprovalAnswer, approvalRequestOf, type ApprovalRequest, decideRequest } from '../approval/decide.js'
import { planStep } from '../approval/step-plan.js'
import type { Bus } from '../bus/bus.js'
import { childRunRow } from '../children/child-contract.js'
import { makeChildRuns } from '../children/child-runs.js'
import { attemptWithin } from './deadline.js'
import { iso, nowMs, store } from './driver-io.js'
import { toolActOf } from '../approval/tool-act.js'
import type { RunContext, RunEvent, runMachine } from '../machine/run-machine.js'
import { isFinalPath, statePath, statusOfState } from '../machine/run-state.js'
import { type CallOutcome, type CircuitBreakers, circuitKey } from './circuit-breaker.js'
import { stepMessages, summarizePrompt, type ToolResultRecord } from './conversation.js'
import { type AttemptSettled, notify, type RunObserver } from './run-observer.js'


/** Tools whose calls change the world: journalled so that a resume never repeats them. */
const JOURNALLED_TOOLS: ReadonlySet<string> = new Set(['write_file', 'exec'])

/** Tools that only read the workspace: running one changes nothing anyone could see. */
const READ_ONLY_TOOLS: ReadonlySet<string> = new Set(['read_file', 'list_dir'])

/** A tool result as the journal keeps it. */
interface JournalledResult {
  readonly ok: boolean
  readonly output: string
  readonly refusal?: { readonly rule: string; readonly layer: string } | undefined
}

/** Everything one run's driver needs; built by the supervisor, owned by the run's fiber. */
export interface RunDriverDeps {
  readonly db: Kysely<Database>
  /** The per-step writes and reads (prepared statements on SQLite). */
  readonly writer: RunWriter
  readonly runId: string
  readonly contract: TaskContract
  readonly providers: ReadonlyArray<Provider>
  readonly workspace: Workspace
  readonly actor: Actor<typeof runMachine>
  /** The conversation so far (opening messages plus every stored step); the driver appends to it. */
  readonly messages: ChatMessage[]
  /** The last transition's seq (0 for a new run). */
  readonly seq: number
  readonly observers: ReadonlyArray<RunObserver>
  readonly retryPolicy: RetryPolicy
  /** Epoch ms after which the run times out: creation time plus `timeoutMs`, so downtime counts. */
  readonly deadline: number
  /** Per-attempt deadline applied when the provider config sets none. */
  readonly attemptTimeoutMs: number
  readonly breakers: CircuitBreakers
  /** The run's policy: its contract's layers plus the decisions remembered for its workspace. */
  readonly policy: CompiledPolicy
  /** Who answers `ask`s when the contract says `prompt` (the terminal, or a TS callback). */
  readonly approver?: Approver | undefined
  readonly newId: () => string
  /** This driver's fencing token: every write checks it, so a superseded driver writes nothing. */
  readonly leaseToken: number
  /** Where child runs go (and events are published); without it, `spawn_child` is not offered. */
  readonly bus?: Bus | undefined
  /** How many runs this process drives now (group commits pay off only with company). */
  readonly concurrentRuns?: () => number
  /** Ends a child nobody drives once its cancel is requested (see child-runs.ts). */
  readonly endUndrivenChild?: (childId: string) => Effect.Effect<void>
  /**
   * The API keys in use: every text a provider or a tool hands the run (answers, error messages,
   * partial output, tool results, verification feedback) is redacted with it before it is
   * stored, published or shown (docs/task-file.md, "API keys").
   */
  readonly secrets?: SecretSet | undefined
}

/** Someone who can answer approval requests while the run waits: a terminal prompt, a TS callback. */
export interface Approver {
  readonly source: 'prompt' | 'api'
  readonly decide: (request: ApprovalRequest) => Promise<ApprovalAnswer>
}

/** A state's entry work result: the event to send, and the step data to commit with its transition. */
interface Work {
  readonly event: RunEvent
  readonly writes?: ReadonlyArray<RunWrite>
  /** In-memory bookkeeping, done as the event is sent. */
  readonly after?: () => void
  /** What observers hear of the work (an attempt's settlement) once its transition is durable. */
  readonly notice?: () => void
}

/** Transitions and step data waiting for one commit. */
interface Staged {
  readonly transitions: NewTransition[]
  readonly writes: RunWrite[]
  head: RunHead | undefined
  /** What observers are told once the commit is durable, in the order it happened. */
  readonly notices: Array<() => void>
}

const emptyStage = (): Staged => ({ transitions: [], writes: [], head: undefined, notices: [] })

const outcomeForBreaker = (error: ProviderError | undefined): CallOutcome =>
  error === undefined ? 'success' : error.kind === 'transient' ? 'transient' : 'other'

/** The driver of one run: performs each state's entry work and commits the resulting transition. */
export const makeRunDriver = (deps: RunDriverDeps) => {
  const { db, writer, runId, contract, actor, messages, observers } = deps
  let seq = deps.seq
  const secrets = deps.secrets
  // Where provider and tool text enters the run; free when no key is known.
  const redact = (text: string): string => (secrets === undefined || secrets.isEmpty ? text : secrets.redact(text))
  let lastToolCalls: ReadonlyArray<ToolCall> = lastAssistantToolCalls(messages)

  /** Writes outside a transition (an attempt row, a journal entry), fenced like a transition. */
  const fenced = (what: string, ...writes: RunWrite[]) => store(what, () => writer.write(runId, deps.leaseToken, writes))

  // Built on the first command: the environment without the contract's keys, and its sandbox.
  let commandSettings: CommandSettings | undefined
  const commands = () => (commandSettings ??= runCommandSettings(contract))

  const childRuns = makeChildRuns({ db, runId, contract, bus: deps.bus, toolCalls: () => lastToolCalls, endUndriven: deps.endUndrivenChild })
  const offeredTools = childRuns.canSpawn ? [...WORKSPACE_TOOLS, SPAWN_CHILD_TOOL] : WORKSPACE_TOOLS

  const context = (): RunContext => actor.getSnapshot().context
  const currentPath = (): string => statePath(actor.getSnapshot().value)

  notify(observers, 'onDriveStarted', {
    runId,
    parentId: contract.lineage?.parentId,
    rootId: contract.lineage?.rootId,
    resumed: deps.seq > 0,
    state: currentPath(),
    step: context().step
  })
  // The supervisor stops the actor whenever it lets go of the run (finished, paused, lease lost,
  // runtime closed): the one signal every way out of a drive shares.
  actor.subscribe({ complete: () => notify(observers, 'onDriveEnded', { runId }) })

  /** What a receipt row of the current attempt says about itself, for `onAttemptSettled`. */
  const attemptOf = (ctx: RunContext): Omit<AttemptSettled, 'outcome' | 'latencyMs'> => {
    const config = contract.providers[ctx.providerIndex]!
    return { runId, step: ctx.step, attempt: ctx.attempt, provider: config.name, providerKind: config.kind, model: config.model, reason: ctx.reason }
  }

  /**
   * Transitions sent but not yet durable, with their step data. Transitions whose next state's
   * entry work is pure (falling over, a verification that only reads files, the checks before a
   * dispatch) are staged and committed together with the next one, in one transaction: the
   * store still gets every transition as its own row, and nothing with an effect (a provider
   * call, a tool, a wait) ever starts before everything staged is durable.
   */
  let staged: Staged = emptyStage()
  let durableSeq = seq
  /** Where the store has the run: what a drive stopped by a failing store reports (docs/durability.md). */
  let durable: { readonly state: string; readonly steps: number } = { state: currentPath(), steps: context().completedSteps }

  /** Sends the event and stages its transition; false when the machine ignores the event. */
  const stage = (work: Work, atMs: number): boolean => {
    const before = actor.getSnapshot()
    actor.send(work.event)
    const after = actor.getSnapshot()
    // An ignored event leaves the very same snapshot (every transition of the machine targets a
    // state, so a taken one never does): one pass through the machine instead of `can` and `send`.
    if (after === before) return false
    const from = statePath(before.value)
    const to = statePath(after.value)
    const at = iso(atMs)
    const ctx = after.context
    seq += 1
    if (work.writes !== undefined) staged.writes.push(...work.writes)
    staged.transitions.push({ run_id: runId, seq, from_state: from, event: work.event.type, to_state: to, snapshot_json: JSON.stringify(actor.getPersistedSnapshot()), at })
    const transition = { runId, seq, from, event: work.event.type, to, at }
    if (work.notice !== undefined) staged.notices.push(work.notice)
    staged.notices.push(() => notify(observers, 'onTransition', transition))
    staged.head = {
      status: statusOfState(to),
      state: to,
      steps: ctx.completedSteps,
      updated_at: at,
      error_json: ctx.error === null ? null : JSON.stringify(ctx.error),
      ended_at: isFinalPath(to) ? at : null
    }
    // In-memory bookkeeping (the conversation) moves on now; a failed flush ends the drive.
    work.after?.()
    return true
  }

  /** Makes everything staged durable in one fenced transaction, then tells the observers. */
  const flush: Effect.Effect<void, StoreError | LeaseLostError> = Effect.suspend(() => {
    const batch = staged
    if (batch.transitions.length === 0 && batch.writes.length === 0) return Effect.void
    staged = emptyStage()
    const write = store('commit transition', () =>
      batch.head === undefined
        ? writer.write(runId, deps.leaseToken, batch.writes)
        : writer.commit(
            { runId, leaseToken: deps.leaseToken, writes: batch.writes, transitions: batch.transitions, head: batch.head },
            // Alone, a run commits at once; among others, its commit may share their transaction.
            { batch: (deps.concurrentRuns?.() ?? 1) > 1 }
          )
    )
    return Effect.matchEffect(write, {
      onFailure: (error) =>
        Effect.suspend(() => {
          seq = durableSeq
          return Effect.fail(error)
        }),
      onSuccess: () =>
        Effect.sync(() => {
          durableSeq = seq
          if (batch.head !== undefined) durable = { state: batch.head.state, steps: batch.head.steps }
          for (const notice of batch.notices) notice()
        })
    })
  })

  /**
   * Sends the event and persists its transition (and anything staged before it) in one
   * transaction. Uninterruptible: a cancel that lands mid-commit waits, so memory and store
   * never disagree.
   */
  const commit = (work: Work): Effect.Effect<void, StoreError | LeaseLostError> =>
    Effect.uninterruptible(Effect.flatMap(nowMs, (at) => (stage(work, at), flush)))

  /**
   * Tells observers now, or, while transitions are staged, once they are durable: events reach
   * observers in the order they happened, and never before the transitions they follow.
   */
  const announce = (notice: () => void): void => {
    if (staged.transitions.length > 0) staged.notices.push(notice)
    else notice()
  }

  /**
   * Whether a state's entry work may be staged behind the transition into it (see `staged`).
   * A step whose calls only read the workspace stages too: its reply, its reads and their
   * results become durable in the transaction that also holds the next dispatch's receipt, so
   * a step costs one commit. Should the process die before it, the reply is lost with the reads
   * (they changed nothing); resume sends the dispatch again and settles the first `unknown`, as
   * for a crash during the call.
   */
  const stagesInto = (path: string): boolean =>
    path === 'fallingOver' ||
    path === 'dispatching' ||
    (path === 'verifying' && (contract.verify === undefined || !verifyRunsCommands(contract.verify))) ||
    (path === 'acting' && lastToolCalls.length > 0 && lastToolCalls.every((call) => READ_ONLY_TOOLS.has(call.name)))

  /**
   * The step whose reply this driver itself just recorded, until its `acting` is first entered:
   * nobody can have decided or journalled anything for that step yet, so nothing is read back.
   */
  let freshStep: number | undefined

  const dispatch = (ctx: RunContext): Effect.Effect<Work, StoreError | LeaseLostError> =>
    Effect.gen(function* () {
      if (ctx.dispatches >= ctx.dispatchCeiling) return { event: { type: 'CEILING_REACHED' } } satisfies Work
      // In a tree the ceiling is shared: every run counts the dispatches of all of them.
      const tree = contract.lineage ?? (ctx.spawnedChildren ? { rootId: runId, treeDispatchCeiling: contract.limits.dispatchCeiling } : undefined)
      if (tree !== undefined) {
        const used = yield* store('count tree dispatches', () => countTreeDispatches(db, tree.rootId))
        if (used >= tree.treeDispatchCeiling) {
          return { event: { type: 'CEILING_REACHED', message: `dispatch ceiling of ${tree.treeDispatchCeiling} exhausted by the run tree` } } satisfies Work
        }
      }
      const provider = deps.providers[ctx.providerIndex]!
      const config = contract.providers[ctx.providerIndex]!
      const startedAt = yield* nowMs
      const key = circuitKey(config)
      const admission = deps.breakers.admit(key, startedAt)
      if (admission === 'open') return skipOpenCircuit(ctx, provider.name, startedAt)
      // The receipt is durable, with every transition staged before it, before the call is made.
      staged.writes.push({ op: 'insertAttempt', row: pendingAttempt(ctx, provider.name, startedAt) })
      yield* Effect.uninterruptible(flush)
      notify(observers, 'onDispatch', { runId, step: ctx.step, attempt: ctx.attempt, provider: provider.name, reason: ctx.reason })
      const deadlineMs = config.attemptTimeoutMs ?? deps.attemptTimeoutMs
      const call = provider.chat({ messages: [...messages], tools: offeredTools })
      const outcome = yield* attemptWithin(
        call,
        deadlineMs,
        () =>
          new ProviderError({
            kind: 'transient',
            provider: provider.name,
            possiblyDelivered: true,
            message: `no answer within the attempt deadline of ${deadlineMs} ms`
          }),
        // A cancel or timeout aborts the call (the adapter's AbortSignal); the receipt says so.
        Effect.gen(function* () {
          const end = yield* nowMs
          deps.breakers.record(key, admission, 'abandoned', end)
          yield* fenced('settle a cancelled attempt', settle(ctx, { outcome: 'cancelled', settled_at: iso(end), latency_ms: end - startedAt })).pipe(Effect.ignore)
          notify(observers, 'onAttemptSettled', { ...attemptOf(ctx), outcome: 'cancelled', latencyMs: end - startedAt })
        })
      )
      const settledAt = yield* nowMs
      const latency = settledAt - startedAt
      deps.breakers.record(key, admission, outcomeForBreaker(outcome._tag === 'Left' ? outcome.left : undefined), settledAt)
      if (outcome._tag === 'Left') {
        const error = redactedError(outcome.left)
        return {
          event: { type: 'PROVIDER_ERROR', error: runErrorFromProvider(error), retryAt: settledAt + retryDelayMs(deps.retryPolicy, ctx.retries, error.retryAfterMs) },
          writes: [
            settle(ctx, {
              outcome: error.possiblyDelivered === true ? 'unknown' : 'failed',
              settled_at: iso(settledAt),
              error_kind: error.kind,
              http_status: error.httpStatus ?? null,
              error_message: error.message,
              latency_ms: latency,
              partial_text: error.partialText ?? null
            })
          ],
          notice: () =>
            notify(observers, 'onAttemptSettled', {
              ...attemptOf(ctx),
              outcome: error.possiblyDelivered === true ? 'unknown' : 'failed',
              errorKind: error.kind,
              httpStatus: error.httpStatus,
              latencyMs: latency
            })
        } satisfies Work
      }
      const reply = redactedReply(outcome.right)
      const step = { text: reply.text, toolCalls: reply.toolCalls }
      return {
        event: { type: 'PROVIDER_OK', hasToolCalls: reply.toolCalls.length > 0 },
        writes: [
          settle(ctx, {
            outcome: 'ok',
            settled_at: iso(settledAt),
            latency_ms: latency,
            ttft_ms: reply.timeToFirstTokenMs ?? null,
            tokens_in: reply.usage?.inputTokens ?? null,
            tokens_out: reply.usage?.outputTokens ?? null
          }),
          {
            op: 'insertStep',
            row: {
              run_id: runId,
              step: ctx.step,
              provider: provider.name,
              prompt_summary: summarizePrompt(messages),
              text: reply.text,
              tool_calls_json: JSON.stringify(reply.toolCalls),
              results_json: null,
              tokens_in: reply.usage?.inputTokens ?? 0,
              tokens_out: reply.usage?.outputTokens ?? 0,
              at: iso(settledAt)
            }
          }
        ],
        after: () => {
          messages.push(...stepMessages(step))
          lastToolCalls = reply.toolCalls
          freshStep = ctx.step
        },
        notice: () =>
          notify(observers, 'onAttemptSettled', {
            ...attemptOf(ctx),
            outcome: 'ok',
            latencyMs: latency,
            ttftMs: reply.timeToFirstTokenMs,
            tokensIn: reply.usage?.inputTokens,
            tokensOut: reply.usage?.outputTokens
          })
      } satisfies Work
    })

  /** A provider's error as the run keeps it: message and partial output redacted (any `Provider`, not only ours). */
  const redactedError = (error: ProviderError): ProviderError => {
    if (secrets === undefined || secrets.isEmpty) return error
    const message = secrets.redact(error.message)
    const partialText = error.partialText === undefined ? undefined : secrets.redact(error.partialText)
    if (message === error.message && partialText === error.partialText) return error
    const { kind, provider, httpStatus, retryAfterMs, possiblyDelivered, cause } = error
    return new ProviderError({ kind, provider, httpStatus, retryAfterMs, possiblyDelivered, cause, message, partialText })
  }

  /** A model's answer as the run keeps it: a model can repeat whatever it was shown. */
  const redactedReply = <R extends { readonly text: string; readonly toolCalls: ReadonlyArray<ToolCall> }>(reply: R): R => {
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
  const settle = (ctx: RunContext, patch: AttemptSettlement): RunWrite => ({ op: 'settleAttempt', runId, step: ctx.step, attempt: ctx.attempt, patch })

  /** The receipt row of an attempt about to be made: nothing known yet but who and why. */
  const pendingAttempt = (ctx: RunContext, provider: string, startedAt: number): NewAttempt => ({
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
  const skipOpenCircuit = (ctx: RunContext, provider: string, at: number): Work => {
    const error: RunError = { kind: 'transient', message: 'circuit open', provider }
    return {
      event: { type: 'CIRCUIT_OPEN', error, retryAt: at + retryDelayMs(deps.retryPolicy, ctx.retries, undefined) },
      writes: [
        { op: 'insertAttempt', row: pendingAttempt(ctx, provider, at) },
        settle(ctx, { outcome: 'failed', settled_at: iso(at), error_kind: 'transient', error_message: 'circuit open', latency_ms: 0 })
      ],
      notice: () => notify(observers, 'onAttemptSettled', { ...attemptOf(ctx), outcome: 'failed', errorKind: 'transient', latencyMs: 0 })
    }
  }

  /**
   * Performs one allowed call. Side-effecting calls are journalled: `started` is durable before
   * the effect, `completed` with its result right after, so a resume never repeats one.
   */
  const perform = (
    step: number,
    position: number,
    call: ToolCall,
    recovery: ApprovalRow | undefined,
    note: string | undefined
  ): Effect.Effect<JournalledResult, StoreError | LeaseLostError> =>
    Effect.gen(function* () {
      const journalled = JOURNALLED_TOOLS.has(call.name)
      let result: JournalledResult
      if (recovery?.resolution === 'completed') {
        result = { ok: true, output: `The command was interrupted and was not run again. The operator reports: ${recovery.account ?? '(no account given)'}` }
      } else {
        if (journalled) {
          const startedAt = iso(yield* nowMs)
          yield* fenced('journal a started tool call', {
            op: 'startToolEffect',
            row: { run_id: runId, step, position, tool_call_id: call.id, name: call.name, arguments: call.arguments, started_at: startedAt }
          })
        }
        const outcome = yield* runTool(deps.workspace, call, commands())
        // A command can print the key (`cat /proc/$PPID/environ`): redacted before anyone keeps it.
        const output = redact(note === undefined ? outcome.output : `${note}\n${outcome.output}`)
        result = { ok: outcome.ok, output, ...(outcome.refusal !== undefined ? { refusal: outcome.refusal } : {}) }
      }
      if (journalled) {
        const completedAt = iso(yield* nowMs)
        const json = JSON.stringify(result)
        yield* fenced('journal a completed tool call', { op: 'completeToolEffect', runId, step, position, resultJson: json, at: completedAt })
      }
      return result
    })

  const recoveryRequest = (step: number, position: number, key: string, call: ToolCall, at: string): NewApproval => ({
    id: deps.newId(),
    run_id: runId,
    step,
    position,
    tool_call_id: key,
    kind: 'recovery',
    act: 'exec',
    target: toolTarget(call),
    payload_json: JSON.stringify({ name: call.name, arguments: call.arguments }),
    rule: 'interrupted',
    layer: 'journal',
    source: null,
    edited_payload_json: null,
    created_at: at,
    decided_at: null
  })

  /**
   * Runs the step's tool calls as policy allows. The whole step is planned first: if any call
   * needs a person's decision, nothing runs and the run moves to `awaitingApproval` with the
   * requests persisted; once decided, re-entering `acting` plans again and performs exactly
   * what was approved.
   */
  const act = (ctx: RunContext): Effect.Effect<Work, StoreError | LeaseLostError> =>
    Effect.gen(function* () {
      const fresh = freshStep === ctx.step
      freshStep = undefined
      const approvals = fresh ? [] : yield* store('load approvals', () => writer.approvals(runId, ctx.step))
      const plan = planStep({ runId, step: ctx.step, policy: deps.policy, calls: lastToolCalls, approvals, mode: contract.approval, newId: deps.newId })
      const at = iso(yield* nowMs)
      if (plan.pending.length > 0) {
        return {
          event: { type: 'APPROVAL_REQUESTED' },
          writes: plan.pending.map((request): RunWrite => ({ op: 'insertApproval', row: { ...request, created_at: at } }))
        } satisfies Work
      }
      // An exec the journal saw start but never finish may or may not have had its effect:
      // a person decides (retry, completed with an account, or abort) before the step goes on.
      const journal = fresh ? [] : yield* store('load the tool journal', () => writer.toolEffects(runId, ctx.step))
      const interrupted = new Map<number, ApprovalRow | undefined>()
      const recoveries: NewApproval[] = []
      for (const [position, item] of plan.calls.entries()) {
        const entry = journal.find((e) => e.position === position)
        if (item.kind !== 'run' || item.call.name !== 'exec' || entry?.status !== 'started') continue
        const key = `${item.call.id}#recovery@${entry.started_at}`
        const request = approvals.find((a) => a.tool_call_id === key)
        if (request === undefined || request.status === 'pending') {
          recoveries.push(recoveryRequest(ctx.step, position, key, item.call, at))
        } else {
          interrupted.set(position, request)
        }
      }
      if (recoveries.length > 0) {
        return {
          event: { type: 'APPROVAL_REQUESTED' },
          writes: recoveries.map((row): RunWrite => ({ op: 'insertApproval', row }))
        } satisfies Work
      }
      const aborted = [...interrupted.values()].find((r) => r?.resolution === 'abort')
      if (aborted !== undefined) {
        return { event: { type: 'CANCEL', message: `aborted by ${aborted.source ?? 'the operator'}: the interrupted exec ${JSON.stringify(aborted.target)} was not resumed` } } satisfies Work
      }

      // spawn_child calls: children are created once (their ids derive from the call); the
      // step waits in awaitingChildren until all are done, then answers each with its result.
      const spawns = yield* childRuns.planSpawns(plan.calls, ctx.step)
      const spawned = spawns.results
      if (spawns.unfinished) {
        return {
          event: { type: 'CHILDREN_SPAWNED' },
          writes: spawns.newChildren.map((child): RunWrite => ({ op: 'insertRun', row: childRunRow(child.id, runId, child.contract, at) }))
        } satisfies Work
      }

      const results: ToolResultRecord[] = []
      const events: NewPolicyEvent[] = plan.events.map((e) => ({ ...e, at }))
      for (const [position, item] of plan.calls.entries()) {
        const call = item.requested
        const entry = journal.find((e) => e.position === position)
        let result: JournalledResult
        const child = spawned.get(position)
        if (item.kind === 'refuse') {
          result = { ok: false, output: item.output }
        } else if (child !== undefined) {
          result = child
        } else if (entry?.status === 'completed' && entry.result_json !== null) {
          // Done before the last driver stopped: replay the recorded result, never the effect.
          result = JSON.parse(entry.result_json) as JournalledResult
        } else {
          const toolCall = { runId, step: ctx.step, name: call.name, target: toolTarget(call) }
          announce(() => notify(observers, 'onToolCall', toolCall))
          const recovery = interrupted.get(position)
          result = yield* perform(ctx.step, position, item.call, recovery, item.note)
          const toolResult = { runId, step: ctx.step, name: call.name, ok: result.ok, output: result.output }
          announce(() => notify(observers, 'onToolResult', toolResult))
        }
        if (result.refusal !== undefined) {
          // The sandbox refused it (a path escaping the workspace): audited like a policy refusal.
          const toolAct = item.kind === 'run' ? toolActOf(item.call) : undefined
          events.push({
            run_id: runId,
            step: ctx.step,
            kind: 'refusal',
            act: toolAct?.act ?? 'read',
            target: toolAct?.target ?? toolTarget(call),
            rule: result.refusal.rule,
            layer: result.refusal.layer,
            decision: 'deny',
            source: 'policy',
            request_id: null,
            performed_target: null,
            at
          })
        }
        results.push({ toolCallId: call.id, name: call.name, ok: result.ok, output: result.output })
      }
      return {
        event: { type: 'TOOLS_DONE' },
        writes: [
          ...plan.decided.map((request): RunWrite => ({ op: 'insertApproval', row: { ...request, created_at: at, decided_at: at } })),
          { op: 'insertPolicyEvents', rows: events },
          { op: 'setStepResults', runId, step: ctx.step, resultsJson: JSON.stringify(results) }
        ],
        after: () => {
          for (const r of results) messages.push({ role: 'tool', toolCallId: r.toolCallId, name: r.name, content: r.output })
        }
      } satisfies Work
    })

  /**
   * Waits for the step's requests to be decided. With an approver (terminal or TS callback) it
   * asks now; otherwise the run pauses here (the process may exit) until `approve` and `resume`.
   */
  const awaitApprovals = (ctx: RunContext): Effect.Effect<Work | undefined, StoreError | LeaseLostError> =>
    Effect.gen(function* () {
      const pending = (yield* store('load approvals', () => writer.approvals(runId, ctx.step))).filter((a) => a.status === 'pending')
      if (pending.length > 0) {
        const approver = deps.approver
        // Recovery requests are an operator's call (`approve --retry|--completed|--abort`).
        if (approver === undefined || contract.approval !== 'prompt' || pending.some((r) => r.kind === 'recovery')) return undefined
        for (const request of pending) {
          const answer = yield* Effect.promise(() => approver.decide(approvalRequestOf(request)))
          const at = iso(yield* nowMs)
          yield* store('record decision', () =>
            decideRequest({ db, policy: deps.policy, workspace: contract.workspace, request, answer, source: approver.source, at })
          )
        }
      }
      return { event: { type: 'APPROVALS_DECIDED' } } satisfies Work
    })

  const check = (ctx: RunContext): Effect.Effect<Work> =>
    Effect.gen(function* () {
      if (contract.verify === undefined) {
        // Without a contract the run is done when the model stops asking for tools.
        return { event: { type: ctx.lastHadToolCalls ? 'VERIFY_FAILED' : 'VERIFY_PASSED' } } satisfies Work
      }
      const result = yield* verify(deps.workspace, contract.verify, commands())
      if (result.passed) return { event: { type: 'VERIFY_PASSED' } } satisfies Work
      if (ctx.lastHadToolCalls) return { event: { type: 'VERIFY_FAILED' } } satisfies Work
      // The model thinks it is done but the contract disagrees: tell it why.
      const feedback = `The goal is not reached yet: ${redact(result.detail)}. Keep working.`
      return {
        event: { type: 'VERIFY_FAILED' },
        writes: [{ op: 'setStepFeedback', runId, step: ctx.step, feedback }],
        after: () => messages.push({ role: 'user', content: feedback })
      } satisfies Work
    })

  /**
   * Waits until the persisted `retryAt`. A retry whose wait would pass the run's deadline ends
   * the run now, with the error that caused it, instead of sleeping into a timeout.
   */
  const waitToRetry = (ctx: RunContext): Effect.Effect<Work> =>
    Effect.gen(function* () {
      const retryAt = ctx.retryAt ?? 0
      if (retryAt > deps.deadline) {
        const cause = ctx.error ?? { kind: 'transient' as const, message: 'provider failed' }
        const error: RunError = { ...cause, message: `${cause.message}; not retrying: the wait would pass the run's deadline` }
        return { event: { type: 'FAIL', error } } satisfies Work
      }
      yield* Effect.sleep(Duration.millis(Math.max(0, retryAt - (yield* nowMs))))
      return { event: { type: 'RETRY_DUE' } } satisfies Work
    })

  /** The entry work of the current state; `undefined` when the run stops here (final or paused). */
  const workFor = (path: string, ctx: RunContext): Effect.Effect<Work | undefined, StoreError | LeaseLostError> | undefined => {
    switch (path) {
      case 'dispatching':
        return dispatch(ctx)
      case 'fallingOver':
        return Effect.succeed({ event: { type: 'NEXT_PROVIDER' } })
      case 'retrying':
        return waitToRetry(ctx)
      case 'acting':
        return act(ctx)
      case 'verifying':
        return check(ctx)
      case 'awaitingApproval':
        return awaitApprovals(ctx)
      case 'awaitingChildren':
        return childRuns.awaitChildren(ctx.step)
      default:
        return undefined
    }
  }

  /**
   * Drives the run until it finishes or pauses. Interrupting it is how cancel and timeout stop the
   * work; whoever interrupts it runs `afterInterrupt` once it is (see there).
   */
  const drive: Effect.Effect<void, StoreError | LeaseLostError> = Effect.gen(function* () {
    for (;;) {
      const path = currentPath()
      if (!stagesInto(path)) yield* Effect.uninterruptible(flush)
      const work = workFor(path, context())
      if (work === undefined) return
      const next = yield* work
      if (next === undefined) return yield* Effect.uninterruptible(flush)
      stage(next, yield* nowMs)
    }
  })

  /**
   * Interrupted (cancel, timeout) with pure transitions staged: they are history all the same.
   * Run by whoever interrupted `drive` rather than by an `onInterrupt` around it: that wrapper
   * would be one more frame every idle run keeps on its stack. Nothing staged, nothing written.
   */
  const afterInterrupt: Effect.Effect<void> = Effect.ignore(flush)

  /**
   * Prepares a restored run: a dispatch that was in flight when the last driver died is settled
   * `unknown` (the provider may have answered) and sent again as a new attempt.
   */
  const recover: Effect.Effect<void, StoreError | LeaseLostError> = Effect.gen(function* () {
    if (currentPath() !== 'dispatching') return
    yield* store('settle lost attempts', () => writer.settlePending(runId, deps.leaseToken, 'unknown', new Date().toISOString()))
    // The current attempt's receipt exists: that dispatch went out (a crash left it pending, now
    // `unknown`; a shutdown settled it `cancelled`). The next one is a new attempt.
    const ctx = context()
    if (yield* store('look up the attempt', () => writer.attemptRecorded(runId, ctx.step, ctx.attempt))) yield* commit({ event: { type: 'DISPATCH_LOST' } })
  })

  return { drive, afterInterrupt, recover, commit, cancelChildren: childRuns.cancelChildren, currentPath, context, lastSeq: () => seq, durable: () => durable }
}

export type RunDriver = ReturnType<typeof makeRunDriver>

const lastAssistantToolCalls = (messages: ReadonlyArray<ChatMessage>): ReadonlyArray<ToolCall> => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === 'assistant') return message.toolCalls
  }
  return []
}

/** The path or command a tool call is about, for progress lines (never file contents). */
const toolTarget = (call: ToolCall): string => {
  try {
    const args = JSON.parse(call.arguments) as Record<string, unknown>
    const target = args['path'] ?? args['command']
    return typeof target === 'string' ? target : ''
  } catch {
    return ''
  }
}

export type { RunError }
