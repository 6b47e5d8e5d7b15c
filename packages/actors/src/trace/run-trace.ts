import { inSpawnOrder, spawnRanks } from '../protocol/spawn-order.js'
import { BUILTIN_TOOLS, FINAL_ANSWER, jsonTextTooDeep, MAX_NESTING_DEPTH, type RunError, type ToolEffect, type Usage } from '@agentvisor/core'
import {
  type ApprovalRow,
  type AttemptRow,
  type Executor,
  getRunRow,
  listAttempts,
  listApprovals,
  listJournalEntries,
  listForks,
  listPolicyEvents,
  listRuns,
  listSteps,
  listTransitions,
  type PolicyEventRow,
  type RunRecord,
  recordedUsage,
  runContracts,
  type StepRow,
  type StoreError,
  toRunRecord
} from '@agentvisor/store'
import { Effect } from 'effect'
import { storedOutput } from '../driver/conversation.js'
import { runUsageOf, treeUsageOf } from '../driver/run-usage.js'

/** One model-call attempt of a receipt (docs/cli.md, `--json`). Optional fields appear when known. */
export interface AttemptTrace {
  readonly provider: string
  readonly reason: string
  readonly outcome: string
  readonly errorKind?: string
  readonly httpStatus?: number
  readonly message?: string
  readonly latencyMs?: number
  /** Null when unknown (not streamed), never 0 as a stand-in. */
  readonly ttftMs: number | null
  readonly tokensIn?: number
  readonly tokensOut?: number
  readonly partialText?: string
  /** When it was sent, and settled (absent while in flight): what time travel places it by. */
  readonly startedAt: string
  readonly settledAt?: string
}

/** One refusal or decision of the audit trail; never file contents. */
export interface PolicyEventTrace {
  readonly step: number
  readonly kind: 'refusal' | 'decision'
  readonly act: string
  readonly target: string
  readonly rule: string
  readonly layer: string
  readonly decision: string
  readonly source: string
  readonly requestId?: string
  /** What was performed instead of `target` (approved with edits). */
  readonly performedTarget?: string
  readonly at: string
}

/** An approval request and where it stands. */
export interface ApprovalTrace {
  readonly id: string
  readonly step: number
  readonly act: string
  readonly target: string
  readonly status: string
  readonly rule: string
  readonly layer: string
  readonly source?: string
  readonly remember?: boolean
  /** `recovery` for an exec interrupted after it started (absent for policy requests). */
  readonly kind?: string
  /** How a recovery request was settled, and the operator's account. */
  readonly resolution?: string
  readonly account?: string
  /** The arguments performed instead of the requested ones (approved with edits). */
  readonly editedArguments?: unknown
  readonly createdAt: string
  /** When it was decided or answered. */
  readonly decidedAt?: string
}

/** The full trace of a run, exactly the `show --json` object. */
export interface RunTrace {
  /** `usage` always (summed from the receipts while the run runs); `treeUsage` when it has children. */
  readonly run: RunRecord & {
    readonly usage: Usage
    readonly treeUsage?: Usage
    readonly error?: RunError
    /** The run and seq this run was forked from (`agentvisor fork`). */
    readonly forkedFrom?: { readonly runId: string; readonly seq: number }
  }
  readonly transitions: ReadonlyArray<{ seq: number; from: string; event: string; to: string; at: string }>
  readonly steps: ReadonlyArray<{
    step: number
    provider: string
    promptSummary: string
    text: string
    /** Each call's tool source (`builtin`, `module`, `mcp:<server>`) and effect class, when the tool is known. */
    toolCalls: ReadonlyArray<{ name: string; arguments: unknown; source?: string; effect?: ToolEffect }>
    results: ReadonlyArray<string>
    tokens: number
    /** When the answer was recorded. */
    at: string
  }>
  readonly receipts: ReadonlyArray<{ step: number; attempts: ReadonlyArray<AttemptTrace>; winner: number | null }>
  readonly policyEvents: ReadonlyArray<PolicyEventTrace>
  readonly approvals: ReadonlyArray<ApprovalTrace>
  readonly children: ReadonlyArray<{ id: string; status: string; createdAt: string }>
  /** The runs forked from this one (`agentvisor fork`), oldest first; absent when none. */
  readonly forks?: ReadonlyArray<{ runId: string; seq: number }>
  /** What a succeeded run produced (docs/agents.md, "Structured results"). */
  readonly output?: unknown
  /**
   * The run's turns (docs/policy.md, "Follow-ups"): the first from seq 1, then one per follow-up,
   * from its `FOLLOW_UP` transition, with the message that began it.
   */
  readonly turns: ReadonlyArray<{ turn: number; seq: number; firstStep: number; at: string; message?: string }>
}

/** The built-ins' classes are fixed: their calls' results do not record them (docs/tools.md). */
const BUILTIN_EFFECTS: ReadonlyMap<string, ToolEffect> = new Map([...BUILTIN_TOOLS.map((tool) => [tool.name, tool.effect] as const), [FINAL_ANSWER, 'read']])

/** A call's tool source and class: recorded with its result, or a built-in's; none for an unknown tool. */
const toolOf = (step: StepRow, call: { readonly id: string; readonly name: string }): { source?: string; effect?: ToolEffect } => {
  const result = step.results?.find((r) => r.toolCallId === call.id)
  if (result?.source !== undefined && result.effect !== undefined) return { source: result.source, effect: result.effect }
  const builtin = BUILTIN_EFFECTS.get(call.name)
  return builtin === undefined ? {} : { source: 'builtin', effect: builtin }
}

/**
 * Tool-call arguments as JSON when they parse, else the raw text the model sent. Arguments nested
 * past the limit (docs/task-file.md), in rows stored before it existed, stay text: parsed, they
 * would overflow the stack of whatever serialises the trace.
 */
const parseArguments = (raw: string): unknown => {
  if (jsonTextTooDeep(raw, MAX_NESTING_DEPTH)) return raw
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

/**
 * Reads a run's whole trace from the store; undefined when there is no such run. Fails with
 * `StoreError` when the store cannot be read or a row of the run is corrupt (docs/durability.md,
 * "Corrupt rows"). The contracts (the run's and its children's) are not read: a trace shows none.
 *
 * @example
 * const trace = await Effect.runPromise(loadRunTrace(store.db, runId))
 */
export const loadRunTrace = (db: Executor, runId: string): Effect.Effect<RunTrace | undefined, StoreError> =>
  Effect.gen(function* () {
    const run = yield* getRunRow(db, runId)
    if (run === undefined) return undefined
    const [transitions, steps, attempts, listed, approvals, policyEvents, forks] = yield* Effect.all(
      [
        listTransitions(db, runId),
        listSteps(db, runId),
        listAttempts(db, runId),
        listRuns(db, { parentId: runId }),
        listApprovals(db, runId),
        listPolicyEvents(db, runId),
        listForks(db, runId)
      ],
      { concurrency: 'unbounded' }
    )
    // In spawn order: the children of one step share a timestamp; the parent's calls order them.
    const children = inSpawnOrder(listed, spawnRanks(runId, steps))
    const usage = recordedUsage(run.usage_json) ?? (yield* usageFromReceipts(db, runId))
    const treeUsage = children.length > 0 ? yield* treeUsageOf(db, runId) : undefined
    return {
      run: {
        ...toRunRecord(run),
        usage,
        ...(treeUsage !== undefined ? { treeUsage } : {}),
        ...(run.error !== null ? { error: run.error } : {}),
        ...(run.forked_from_run != null ? { forkedFrom: { runId: run.forked_from_run, seq: run.forked_from_seq ?? 0 } } : {})
      },
      ...(forks.length > 0 ? { forks: forks.map((fork) => ({ runId: fork.id, seq: fork.seq })) } : {}),
      transitions: transitions.map((t) => ({ seq: t.seq, from: t.from_state, event: t.event, to: t.to_state, at: t.at })),
      steps: steps.map(stepTrace),
      receipts: receiptsOf(attempts),
      policyEvents: policyEvents.map(policyEventTrace),
      approvals: approvals.map(approvalTrace),
      children: children.map((c) => ({ id: c.id, status: c.status, createdAt: c.created_at })),
      ...outputOf(run.status, steps),
      turns: yield* turnsOf(db, runId, transitions)
    }
  })

// Each row as the trace shows it (docs/cli.md, `--json`): optional fields only when the row has them.

const stepTrace = (s: StepRow): RunTrace['steps'][number] => ({
  step: s.step,
  provider: s.provider,
  promptSummary: s.prompt_summary,
  text: s.text,
  toolCalls: s.tool_calls.map((c) => ({ name: c.name, arguments: parseArguments(c.arguments), ...toolOf(s, c) })),
  results: s.results === null ? [] : s.results.map((r) => r.output),
  tokens: s.tokens_in + s.tokens_out,
  at: s.at
})

const attemptTrace = (a: AttemptRow): AttemptTrace => ({
  provider: a.provider,
  reason: a.reason,
  outcome: a.outcome,
  ...(a.error_kind !== null ? { errorKind: a.error_kind } : {}),
  ...(a.http_status !== null ? { httpStatus: a.http_status } : {}),
  ...(a.error_message !== null ? { message: a.error_message } : {}),
  ...(a.latency_ms !== null ? { latencyMs: a.latency_ms } : {}),
  ttftMs: a.ttft_ms,
  ...(a.tokens_in !== null ? { tokensIn: a.tokens_in } : {}),
  ...(a.tokens_out !== null ? { tokensOut: a.tokens_out } : {}),
  ...(a.partial_text !== null ? { partialText: a.partial_text } : {}),
  startedAt: a.started_at,
  ...(a.settled_at !== null ? { settledAt: a.settled_at } : {})
})

/** Each step's attempts in order, and which of them answered. */
const receiptsOf = (attempts: ReadonlyArray<AttemptRow>): RunTrace['receipts'] => {
  const receipts = new Map<number, AttemptTrace[]>()
  const winners = new Map<number, number>()
  for (const a of attempts) {
    const list = receipts.get(a.step) ?? []
    if (a.outcome === 'ok') winners.set(a.step, list.length)
    list.push(attemptTrace(a))
    receipts.set(a.step, list)
  }
  return [...receipts.entries()].map(([step, list]) => ({ step, attempts: list, winner: winners.get(step) ?? null }))
}

const policyEventTrace = (e: PolicyEventRow): PolicyEventTrace => ({
  step: e.step,
  kind: e.kind,
  act: e.act,
  target: e.target,
  rule: e.rule,
  layer: e.layer,
  decision: e.decision,
  source: e.source,
  ...(e.request_id !== null ? { requestId: e.request_id } : {}),
  ...(e.performed_target !== null ? { performedTarget: e.performed_target } : {}),
  at: e.at
})

const approvalTrace = (a: ApprovalRow): ApprovalTrace => ({
  id: a.id,
  step: a.step,
  act: a.act,
  target: a.target,
  status: a.status,
  rule: a.rule,
  layer: a.layer,
  ...(a.source !== null ? { source: a.source } : {}),
  ...(a.remember === 1 ? { remember: true } : {}),
  ...(a.kind !== 'policy' ? { kind: a.kind } : {}),
  ...(a.resolution !== null ? { resolution: a.resolution } : {}),
  ...(a.account !== null ? { account: a.account } : {}),
  ...(a.edited_payload !== null ? { editedArguments: parseArguments(a.edited_payload.arguments) } : {}),
  createdAt: a.created_at,
  ...(a.decided_at !== null ? { decidedAt: a.decided_at } : {})
})

/** The turns of a run: where each began (`FOLLOW_UP` transitions), with its message read from the journal. */
const turnsOf = (
  db: Executor,
  runId: string,
  transitions: ReadonlyArray<{ seq: number; event: string; at: string }>
): Effect.Effect<RunTrace['turns'], StoreError> => {
  const turns: Array<RunTrace['turns'][number]> = [{ turn: 1, seq: 1, firstStep: 1, at: transitions[0]?.at ?? '' }]
  if (!transitions.some((t) => t.event === 'FOLLOW_UP')) return Effect.succeed(turns)
  return Effect.map(listJournalEntries(db, runId), (entries) => turnsFrom(turns, entries, transitions))
}

const turnsFrom = (
  turns: Array<RunTrace['turns'][number]>,
  entries: ReadonlyArray<{ readonly transitions_json: string }>,
  transitions: ReadonlyArray<{ seq: number; event: string; at: string }>
): RunTrace['turns'] => {
  const messages = new Map<number, string>()
  for (const entry of entries) {
    try {
      const events = JSON.parse(entry.transitions_json) as Array<{ seq: number; event: { type?: unknown; text?: unknown } }>
      for (const t of events) if (t.event?.type === 'FOLLOW_UP' && typeof t.event.text === 'string') messages.set(t.seq, t.event.text)
    } catch {
      // An unreadable entry (docs/durability.md, "Corrupt rows"): its turn shows without its message.
    }
  }
  let answered = 0
  for (const t of transitions) {
    if (t.event === 'PROVIDER_OK') answered++
    if (t.event !== 'FOLLOW_UP') continue
    const message = messages.get(t.seq)
    turns.push({ turn: turns.length + 1, seq: t.seq, firstStep: answered + 1, at: t.at, ...(message !== undefined ? { message } : {}) })
  }
  return turns
}

/**
 * A run's usage before its driver let it go (its row has none yet): its receipts, priced by its
 * contract. A contract that does not read leaves the tokens without dollars: a trace never
 * depends on the contract (docs/durability.md, "Corrupt rows").
 */
const usageFromReceipts = (db: Executor, runId: string): Effect.Effect<Usage, StoreError> =>
  Effect.gen(function* () {
    const contract = yield* runContracts(db, [runId]).pipe(
      Effect.map((found) => found.get(runId)),
      Effect.orElseSucceed(() => undefined)
    )
    return (yield* runUsageOf(db, runId, contract)).usage
  })

const outputOf = (status: string, steps: ReadonlyArray<StepRow>): { output?: unknown } => {
  if (status !== 'succeeded') return {}
  const output = storedOutput(steps)
  return output === undefined ? {} : { output }
}
