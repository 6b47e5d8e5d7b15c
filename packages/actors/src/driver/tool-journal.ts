import { RunToolContext, runToolCallNow, type ToolCall, type ToolDefinition, toolActOf } from '@agentvisor/core'
import type { ApprovalRow, LeaseLostError, NewApproval, StoreError, ToolEffectRow } from '@agentvisor/store'
import type { CallPlan } from '../approval/step-plan.js'
import { iso, type Now, thenNow } from './now.js'
import { commandsOf, type Drive, redact } from './drive.js'

/** A tool result as the journal keeps it. */
export interface JournalledResult {
  readonly ok: boolean
  readonly output: string
  readonly refusal?: { readonly rule: string; readonly layer: string } | undefined
}

/**
 * Performs one allowed call of `tool` (undefined: an unknown tool, answered as such). Calls of
 * tools with an effect (class `idempotent` or `effect`, docs/durability.md) are journalled:
 * `started` is durable before the effect, `completed` with its result in the commit right after,
 * so a resume never repeats a completed one (it replays the result; one that started but never
 * completed is run again if `idempotent`, and waits for a recovery decision if `effect`). `read`
 * calls are not.
 */
export const perform = (
  drive: Drive,
  step: number,
  position: number,
  call: ToolCall,
  tool: ToolDefinition | undefined,
  recovery: ApprovalRow | undefined,
  note: string | undefined
): Now<JournalledResult, StoreError | LeaseLostError> => {
  const journalled = tool !== undefined && tool.effect !== 'read'
  if (recovery?.resolution === 'completed') {
    const result = { ok: true, output: `The command was interrupted and was not run again. The operator reports: ${recovery.account ?? '(no account given)'}` }
    return journalled ? completed(drive, step, position, result) : result
  }
  const run = (): Now<JournalledResult> => {
    const { deps } = drive
    const ctx = new RunToolContext(deps.runId, step, position, call.id, deps.workspace, commandsOf(drive))
    return thenNow(runToolCallNow(drive.tools, tool, call, ctx), (outcome): JournalledResult => {
      // A command can print the key (`cat /proc/$PPID/environ`): redacted before anyone keeps it.
      const output = redact(drive, note === undefined ? outcome.output : `${note}\n${outcome.output}`)
      const result = outcome.refusal !== undefined ? { ok: outcome.ok, output, refusal: outcome.refusal } : { ok: outcome.ok, output }
      return journalled ? completed(drive, step, position, result) : result
    })
  }
  if (!journalled) return run()
  // `started` is durable, with everything staged before it (the step's reply), before the
  // effect: one commit (docs/architecture.md, "The hot path").
  const { journal } = drive
  journal.stageWrite({
    op: 'startToolEffect',
    row: { run_id: drive.deps.runId, step, position, tool_call_id: call.id, name: call.name, arguments: call.arguments, started_at: iso(drive.now()) }
  })
  return thenNow(journal.flushNow(), run)
}

/**
 * A journalled call's result: its `completed` goes with the next commit (the step's results and
 * the next receipt, or the next call's `started`: nothing with an effect starts before it is durable).
 */
const completed = (drive: Drive, step: number, position: number, result: JournalledResult): JournalledResult => {
  drive.journal.stageWrite({ op: 'completeToolEffect', runId: drive.deps.runId, step, position, resultJson: JSON.stringify(result), at: iso(drive.now()) })
  return result
}

/** What the journal says of a step's calls of class `effect` that started and never completed. */
export interface InterruptedCalls {
  /** Decided recovery requests, by call position. */
  readonly interrupted: ReadonlyMap<number, ApprovalRow | undefined>
  /** Requests still to be asked (none yet, or still pending). */
  readonly recoveries: ReadonlyArray<NewApproval>
}

/** A step with an empty journal (every fresh step) shares one answer: nothing is allocated for it. */
const NONE_INTERRUPTED: InterruptedCalls = { interrupted: new Map(), recoveries: [] }

/**
 * A call of class `effect` (`exec`) the journal saw start but never finish may or may not have
 * had its effect: a person decides (retry, completed with an account, or abort) before the step
 * goes on. An `idempotent` one is simply run again; a `read` one was never journalled.
 */
export const interruptedCalls = (
  drive: Drive,
  step: number,
  calls: ReadonlyArray<CallPlan>,
  journal: ReadonlyArray<ToolEffectRow>,
  approvals: ReadonlyArray<ApprovalRow>,
  at: string
): InterruptedCalls => {
  if (journal.length === 0) return NONE_INTERRUPTED
  const interrupted = new Map<number, ApprovalRow | undefined>()
  const recoveries: NewApproval[] = []
  for (const [position, item] of calls.entries()) {
    const entry = journal.find((e) => e.position === position)
    if (item.kind !== 'run' || item.tool?.effect !== 'effect' || entry?.status !== 'started') continue
    const key = `${item.call.id}#recovery@${entry.started_at}`
    const request = approvals.find((a) => a.tool_call_id === key)
    if (request === undefined || request.status === 'pending') {
      recoveries.push(recoveryRequest(drive, step, position, key, item.call, item.tool, at))
    } else {
      interrupted.set(position, request)
    }
  }
  return { interrupted, recoveries }
}

const recoveryRequest = (drive: Drive, step: number, position: number, key: string, call: ToolCall, tool: ToolDefinition, at: string): NewApproval => {
  // The request names the call as the policy would (`exec` and its command line). Arguments
  // that name no target (such a call fails as soon as it starts) keep the act `exec` of old.
  const toolAct = toolActOf(tool, call.arguments)
  return {
    id: drive.deps.newId(),
    run_id: drive.deps.runId,
    step,
    position,
    tool_call_id: key,
    kind: 'recovery',
    act: toolAct?.act ?? 'exec',
    target: toolAct?.target ?? toolTarget(call),
    payload_json: JSON.stringify({ name: call.name, arguments: call.arguments }),
    rule: 'interrupted',
    layer: 'journal',
    source: null,
    edited_payload_json: null,
    created_at: at,
    decided_at: null
  }
}

/** The path or command a tool call is about, for progress lines (never file contents). */
export const toolTarget = (call: ToolCall): string => {
  try {
    const args = JSON.parse(call.arguments) as Record<string, unknown>
    const target = args['path'] ?? args['command']
    return typeof target === 'string' ? target : ''
  } catch {
    return ''
  }
}
