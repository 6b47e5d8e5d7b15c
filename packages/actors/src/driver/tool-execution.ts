import type { ToolCall } from '@agentvisor/core'
import type { LeaseLostError, NewPolicyEvent, RunWrite, StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import { planStep } from '../approval/step-plan.js'
import { toolActOf } from '../approval/tool-act.js'
import type { RunContext } from '../machine/run-machine.js'
import type { ToolResultRecord } from '../supervisor/conversation.js'
import { iso, nowMs, store } from '../supervisor/driver-io.js'
import { notify } from '../supervisor/run-observer.js'
import { planSpawns, spawnWork } from './children.js'
import type { Drive } from './drive.js'
import { interruptedCalls, type JournalledResult, perform, toolTarget } from './tool-journal.js'
import type { Work } from './transition-journal.js'

/** Tools that only read the workspace: running one changes nothing anyone could see. */
const READ_ONLY_TOOLS: ReadonlySet<string> = new Set(['read_file', 'list_dir'])
const readsOnly = (call: ToolCall): boolean => READ_ONLY_TOOLS.has(call.name)

/**
 * Whether `acting` may be staged behind the transition into it: a step whose calls only read
 * the workspace. Its reply, its reads and their results become durable in the transaction that
 * also holds the next dispatch's receipt, so the step costs one commit. Should the process die
 * before it, the reply is lost with the reads (they changed nothing); resume sends the dispatch
 * again and settles the first `unknown`, as for a crash during the call. Any other step costs
 * two: the reply is durable before a tool with an effect runs, the results go with the next
 * receipt (docs/architecture.md).
 */
export const actingIsPure = (drive: Drive): boolean => {
  const calls = drive.toolCalls
  return calls.length > 0 && calls.every(readsOnly)
}

/**
 * `acting`'s entry work: runs the step's tool calls as policy allows. The whole step is planned
 * first: if any call needs a person's decision, nothing runs and the run moves to
 * `awaitingApproval` with the requests persisted; once decided, re-entering `acting` plans
 * again and performs exactly what was approved.
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
    const plan = planStep({ runId, step: ctx.step, policy: deps.policy, calls: drive.toolCalls, approvals, mode: contract.approval, newId: deps.newId })
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
          message: `aborted by ${aborted.source ?? 'the operator'}: the interrupted exec ${JSON.stringify(aborted.target)} was not resumed`
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
        result = yield* perform(drive, ctx.step, position, item.call, interrupted.get(position), item.note)
        const toolResult = { runId, step: ctx.step, name: call.name, ok: result.ok, output: result.output }
        journal.whenDurable(() => notify(observers, 'onToolResult', toolResult))
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
