import { type ChatMessage, type StallSettings, type ToolDefinition, toolActOf } from '@agentvisor/core'
import type { ApprovalRow, LeaseLostError, NewPolicyEvent, RunWrite, StoreError, ToolEffectRow } from '@agentvisor/store'
import { Effect } from 'effect'
import { type CallPlan, planStep, type StepPlan } from '../approval/step-plan.js'
import type { SpawnPlan } from './child-spawns.js'
import type { RunContext } from '../machine/run-machine.js'
import type { ToolResultRecord } from './conversation.js'
import { iso, LATER, later, type Now, thenNow, valueNow } from './now.js'
import { listens, notify } from './run-observer.js'
import { planSpawns, spawnWork } from './children.js'
import type { Drive } from './drive.js'
import { callKey, noProgressWarning, progressVerdict, repeatVerdict, repeatWarning, stalledError } from './stall.js'
import { interruptedCalls, type JournalledResult, perform, toolTarget } from './tool-journal.js'
import type { Work } from './transition-journal.js'

/**
 * The catalogue's entry for each of the step's calls (undefined for an unknown tool): looked up
 * by name once a step, into an array the drive keeps, so a step allocates nothing for it.
 */
const stepTools = (drive: Drive): ReadonlyArray<ToolDefinition | undefined> => {
  const calls = drive.toolCalls
  const cached = drive.stepTools
  if (cached.calls !== calls) {
    cached.tools.length = calls.length
    for (let i = 0; i < calls.length; i++) cached.tools[i] = drive.tools.get(calls[i]!.name)
    cached.calls = calls
  }
  return cached.tools
}

/**
 * `acting`'s entry work: runs the step's tool calls as policy allows. The whole step is planned
 * first: if any call needs a person's decision, nothing runs and the run moves to
 * `awaitingApproval` with the requests persisted; once decided, re-entering `acting` plans
 * again and performs exactly what was approved.
 *
 * `acting` is always staged behind the transition into it: its own work only reads (the plan,
 * the approvals, the journal), and a call with an effect makes everything staged durable, with its
 * `started` journal entry, before it runs (tool-journal.ts). So a step whose tools only read costs
 * one commit (its reply, its reads and their results go with the next dispatch's receipt; should
 * the process die before it, the reply is lost with the reads, which changed nothing, and resume
 * sends the dispatch again, settling the first `unknown`), and a step with effects two: the reply
 * with the first `started`, then the results with the next receipt (docs/architecture.md, "The
 * hot path").
 */
export const act = (drive: Drive, ctx: RunContext): Now<Work, StoreError | LeaseLostError> => {
  // A call made once too often ends the run before anything of the step runs (stall.ts).
  const stall = drive.deps.contract.limits.stall
  if (stall !== undefined) {
    const repeated = repeatVerdict(drive.deps.messages, drive.toolCalls, stall).stalled
    if (repeated !== undefined) return { event: { type: 'FAIL', error: stalledError(stall, repeated) } } satisfies Work
  }
  // The fresh-step shortcut: on the step whose reply this driver itself just recorded, nobody
  // can have decided or journalled anything yet, so neither approvals nor the journal is read,
  // and a step whose tools answer at once is planned and run without an Effect (now.ts).
  const fresh = drive.freshStep === ctx.step
  drive.freshStep = undefined
  if (fresh) return planned(drive, ctx, NO_ROWS, true)
  const { runId, writer } = drive.deps
  return Effect.flatMap(writer.approvals(runId, ctx.step), (approvals) => later(planned(drive, ctx, approvals, false)))
}

const NO_ROWS: ReadonlyArray<never> = []

/** The step planned against its approvals: what waits for a person, else what runs. */
const planned = (drive: Drive, ctx: RunContext, approvals: ReadonlyArray<ApprovalRow>, fresh: boolean): Now<Work, StoreError | LeaseLostError> => {
  const { deps } = drive
  const plan = planStep({
    runId: deps.runId,
    step: ctx.step,
    policy: deps.policy,
    calls: drive.toolCalls,
    tools: stepTools(drive),
    approvals,
    mode: deps.contract.approval,
    newId: deps.newId
  })
  const at = iso(drive.now())
  if (plan.pending.length > 0) {
    return {
      event: { type: 'APPROVAL_REQUESTED' },
      writes: plan.pending.map((request): RunWrite => ({ op: 'insertApproval', row: { ...request, created_at: at } }))
    } satisfies Work
  }
  // Decisions first, then questions: a step waits for a person's answers only once nothing else of it does.
  if (plan.questions.length > 0) {
    const fresh = plan.questions.filter((question) => !approvals.some((row) => row.id === question.id))
    return {
      event: { type: 'INPUT_REQUESTED' },
      writes: fresh.map((request): RunWrite => ({ op: 'insertApproval', row: { ...request, created_at: at } }))
    } satisfies Work
  }
  if (fresh) return journalled(drive, ctx, plan, approvals, NO_ROWS, at)
  return Effect.flatMap(deps.writer.toolEffects(deps.runId, ctx.step), (toolJournal) => later(journalled(drive, ctx, plan, approvals, toolJournal, at)))
}

/** The step against its tool journal: what was interrupted waits for a decision, else the calls run. */
const journalled = (
  drive: Drive,
  ctx: RunContext,
  plan: StepPlan,
  approvals: ReadonlyArray<ApprovalRow>,
  toolJournal: ReadonlyArray<ToolEffectRow>,
  at: string
): Now<Work, StoreError | LeaseLostError> => {
  const { interrupted, recoveries } = interruptedCalls(drive, ctx.step, plan.calls, toolJournal, approvals, at)
  if (recoveries.length > 0) {
    return {
      event: { type: 'APPROVAL_REQUESTED' },
      writes: recoveries.map((row): RunWrite => ({ op: 'insertApproval', row }))
    } satisfies Work
  }
  if (interrupted.size > 0) {
    const aborted = [...interrupted.values()].find((r) => r?.resolution === 'abort')
    if (aborted !== undefined) {
      return {
        event: {
          type: 'CANCEL',
          message: `aborted by ${aborted.source ?? 'the operator'}: the interrupted ${aborted.act} ${JSON.stringify(aborted.target)} was not resumed`
        }
      } satisfies Work
    }
  }
  return thenNow(planSpawns(drive, plan.calls, ctx.step), (spawns) =>
    spawns.unfinished ? spawnWork(drive, spawns, at) : performed(new StepRun(drive, ctx, plan, toolJournal, interrupted, spawns, at), 0)
  )
}

/** One step's calls as they are performed, in order: what each needs, and what came of those before. */
class StepRun {
  readonly results: ToolResultRecord[] = []
  readonly events: NewPolicyEvent[]
  constructor(
    readonly drive: Drive,
    readonly ctx: RunContext,
    readonly plan: StepPlan,
    readonly toolJournal: ReadonlyArray<ToolEffectRow>,
    readonly interrupted: ReadonlyMap<number, ApprovalRow | undefined>,
    readonly spawns: SpawnPlan,
    readonly at: string
  ) {
    this.events = plan.events.length === 0 ? [] : plan.events.map((e) => ({ ...e, at }))
  }
}

/**
 * Performs the step's calls from `position` on, in order: at once while each answers at once,
 * and after a wait only from the first call that waits (a command, a flush before an effect).
 */
const performed = (run: StepRun, position: number): Now<Work, StoreError | LeaseLostError> => {
  const calls = run.plan.calls
  for (let i = position; i < calls.length; i++) {
    const item = calls[i]!
    const result = resultOf(run, i, item)
    const value = valueNow(result)
    if (value === LATER) {
      return Effect.flatMap(result as Effect.Effect<JournalledResult, StoreError | LeaseLostError>, (r) => {
        recorded(run, item, r)
        return later(performed(run, i + 1))
      })
    }
    recorded(run, item, value)
  }
  return toolsDone(run)
}

/** What one call of the step comes to: refused, a child's answer, a replayed result, or performed now. */
const resultOf = (run: StepRun, position: number, item: CallPlan): Now<JournalledResult, StoreError | LeaseLostError> => {
  if (item.kind === 'refuse') return { ok: false, output: item.output }
  if (item.kind === 'answered') return { ok: true, output: item.output }
  const child = run.spawns.results.get(position)
  if (child !== undefined) return child
  const entry = run.toolJournal.length === 0 ? undefined : run.toolJournal.find((e) => e.position === position)
  // Done before the last driver stopped: replay the recorded result, never the effect.
  if (entry?.status === 'completed' && entry.result !== null) return entry.result
  const { drive, ctx } = run
  const { runId, observers } = drive.deps
  const call = item.requested
  const { journal } = drive
  const step = ctx.step
  if (listens(observers, 'onToolCall')) {
    const tool = item.tool
    // A built-in's target is its path or command; any other tool's arguments are never shown (docs/tools.md).
    const toolCall =
      tool === undefined
        ? { runId, step, name: call.name, target: '' }
        : { runId, step, name: call.name, target: tool.source === 'builtin' ? toolTarget(call) : '', source: tool.source, effect: tool.effect }
    journal.whenDurable(() => notify(observers, 'onToolCall', toolCall))
  }
  return thenNow(perform(drive, step, position, item.call, item.tool, run.interrupted.get(position), item.note), (result) => {
    if (listens(observers, 'onToolResult')) {
      const toolResult = { runId, step, name: call.name, ok: result.ok, output: result.output }
      journal.whenDurable(() => notify(observers, 'onToolResult', toolResult))
    }
    return result
  })
}

/** Keeps a call's result for the step's results, and audits a sandbox refusal like a policy one. */
const recorded = (run: StepRun, item: CallPlan, result: JournalledResult): void => {
  const call = item.requested
  if (result.refusal !== undefined) {
    // The sandbox refused it (a path escaping the workspace): audited like a policy refusal.
    const toolAct = item.kind === 'run' ? toolActOf(item.tool, item.call.arguments) : undefined
    run.events.push({
      run_id: run.drive.deps.runId,
      step: run.ctx.step,
      kind: 'refusal',
      act: toolAct?.act ?? 'read',
      target: toolAct?.target ?? toolTarget(call),
      rule: result.refusal.rule,
      layer: result.refusal.layer,
      decision: 'deny',
      source: 'policy',
      request_id: null,
      performed_target: null,
      at: run.at
    })
  }
  const tool = item.kind === 'run' ? item.tool : undefined
  // A built-in's source and class are fixed (the trace knows them); any other tool's are recorded.
  run.results.push(
    tool === undefined || tool.source === 'builtin'
      ? { toolCallId: call.id, name: call.name, ok: result.ok, output: result.output }
      : { toolCallId: call.id, name: call.name, ok: result.ok, output: result.output, source: tool.source, effect: tool.effect }
  )
}

/** The step's work once every call has its result: the results, the decisions and the audit, with `TOOLS_DONE`. */
const toolsDone = (run: StepRun): Work => {
  const { drive, ctx, plan, events, at } = run
  const { runId, messages } = drive.deps
  const stall = drive.deps.contract.limits.stall
  const { results, stalled } = stall === undefined ? { results: run.results, stalled: false } : withStallWarnings(drive, run.results, stall)
  return {
    event: stalled && stall !== undefined ? { type: 'FAIL', error: stalledError(stall) } : { type: 'TOOLS_DONE' },
    writes: [
      ...plan.decided.map((request): RunWrite => ({ op: 'insertApproval', row: { ...request, created_at: at, decided_at: at } })),
      { op: 'insertPolicyEvents', rows: events },
      { op: 'setStepResults', runId, step: ctx.step, resultsJson: JSON.stringify(results) }
    ],
    after: () => {
      for (const r of results) messages.push({ role: 'tool', toolCallId: r.toolCallId, name: r.name, content: r.output })
    }
  } satisfies Work
}

/**
 * The step's results with the stall warnings they earn (stall.ts): a repeated call's last result
 * at `repeats`, the last result after `window` steps without progress; `stalled` one step past it.
 */
const withStallWarnings = (
  drive: Drive,
  results: ReadonlyArray<ToolResultRecord>,
  stall: StallSettings
): { readonly results: ReadonlyArray<ToolResultRecord>; readonly stalled: boolean } => {
  const { messages } = drive.deps
  const calls = drive.toolCalls
  const warned = repeatVerdict(messages, calls, stall).warned
  const out = results.map((r) => ({ ...r }) as { -readonly [K in keyof ToolResultRecord]: ToolResultRecord[K] })
  if (warned.size > 0) {
    const last = new Map<string, number>()
    out.forEach((r, i) => {
      const call = calls.find((c) => c.id === r.toolCallId)
      if (call !== undefined && warned.has(callKey(call))) last.set(callKey(call), i)
    })
    for (const i of last.values()) {
      out[i]!.output += repeatWarning(stall)
      out[i]!.stall = 'repeat'
    }
  }
  const added = out.map((r): ChatMessage => ({ role: 'tool', toolCallId: r.toolCallId, name: r.name, content: r.output }))
  const verdict = progressVerdict(messages, added, stall)
  if (verdict === 'warn' && out.length > 0) {
    const lastResult = out[out.length - 1]!
    lastResult.output += noProgressWarning(stall)
    lastResult.stall = 'noProgress'
  }
  return { results: out, stalled: verdict === 'stall' }
}
