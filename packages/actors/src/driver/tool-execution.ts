import { type ToolDefinition, toolActOf } from '@agentvisor/core'
import type { LeaseLostError, NewPolicyEvent, RunWrite, StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import { planStep } from '../approval/step-plan.js'
import type { RunContext } from '../machine/run-machine.js'
import type { ToolResultRecord } from '../supervisor/conversation.js'
import { iso, nowMs, store } from '../supervisor/driver-io.js'
import { notify } from '../supervisor/run-observer.js'
import { planSpawns, spawnWork } from './children.js'
import type { Drive } from './drive.js'
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
export const act = (drive: Drive, ctx: RunContext): Effect.Effect<Work, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    const { deps, journal } = drive
    const { runId, writer, contract, observers } = deps
    // The fresh-step shortcut: on the step whose reply this driver itself just recorded, nobody
    // can have decided or journalled anything yet, so neither approvals nor the journal is read.
    const fresh = drive.freshStep === ctx.step
    drive.freshStep = undefined
    const approvals = fresh ? [] : yield* store('load approvals', () => writer.approvals(runId, ctx.step))
    const plan = planStep({
      runId,
      step: ctx.step,
      policy: deps.policy,
      calls: drive.toolCalls,
      tools: stepTools(drive),
      approvals,
      mode: contract.approval,
      newId: deps.newId
    })
    const at = iso(yield* nowMs)
    if (plan.pending.length > 0) {
      return {
        event: { type: 'APPROVAL_REQUESTED' },
        writes: plan.pending.map((request): RunWrite => ({ op: 'insertApproval', row: { ...request, created_at: at } }))
      } satisfies Work
    }
    const toolJournal = fresh ? [] : yield* store('load the tool journal', () => writer.toolEffects(runId, ctx.step))
    const { interrupted, recoveries } = interruptedCalls(drive, ctx.step, plan.calls, toolJournal, approvals, at)
    if (recoveries.length > 0) {
      return {
        event: { type: 'APPROVAL_REQUESTED' },
        writes: recoveries.map((row): RunWrite => ({ op: 'insertApproval', row }))
      } satisfies Work
    }
    const aborted = [...interrupted.values()].find((r) => r?.resolution === 'abort')
    if (aborted !== undefined) {
      return {
        event: {
          type: 'CANCEL',
          message: `aborted by ${aborted.source ?? 'the operator'}: the interrupted ${aborted.act} ${JSON.stringify(aborted.target)} was not resumed`
        }
      } satisfies Work
    }

    const spawns = yield* planSpawns(drive, plan.calls, ctx.step)
    const spawned = spawns.results
    if (spawns.unfinished) return spawnWork(drive, spawns, at)

    const results: ToolResultRecord[] = []
    const events: NewPolicyEvent[] = plan.events.map((e) => ({ ...e, at }))
    for (const [position, item] of plan.calls.entries()) {
      const call = item.requested
      const entry = toolJournal.find((e) => e.position === position)
      let result: JournalledResult
      const child = spawned.get(position)
      if (item.kind === 'refuse') {
        result = { ok: false, output: item.output }
      } else if (child !== undefined) {
        result = child
      } else if (entry?.status === 'completed' && entry.result !== null) {
        // Done before the last driver stopped: replay the recorded result, never the effect.
        result = entry.result
      } else {
        const toolCall = { runId, step: ctx.step, name: call.name, target: toolTarget(call) }
        journal.whenDurable(() => notify(observers, 'onToolCall', toolCall))
        result = yield* perform(drive, ctx.step, position, item.call, item.tool, interrupted.get(position), item.note)
        const toolResult = { runId, step: ctx.step, name: call.name, ok: result.ok, output: result.output }
        journal.whenDurable(() => notify(observers, 'onToolResult', toolResult))
      }
      if (result.refusal !== undefined) {
        // The sandbox refused it (a path escaping the workspace): audited like a policy refusal.
        const toolAct = item.kind === 'run' ? toolActOf(item.tool, item.call.arguments) : undefined
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
    const messages = deps.messages
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
