import {
  ASK_HUMAN,
  decodeAskHumanArgs,
  type ApprovalMode,
  builtinCatalogue,
  type CompiledPolicy,
  describeDecision,
  type ToolCall,
  type ToolDefinition,
  toolActOf
} from '@agentvisor/core'
import type { ApprovalRow, NewApproval, NewPolicyEvent } from '@agentvisor/store'
import { Either } from 'effect'

/** What happens to one tool call of a step once policy and approvals have spoken. */
export type CallPlan =
  /**
   * Run `call` (the edited one when approved with edits) as its catalogue entry `tool` says
   * (undefined: an unknown tool, answered as such); `note` precedes its output to the model.
   */
  | {
      readonly kind: 'run'
      readonly requested: ToolCall
      readonly call: ToolCall
      readonly tool: ToolDefinition | undefined
      readonly note?: string | undefined
    }
  /** Do not run it: `output` tells the model why. */
  | { readonly kind: 'refuse'; readonly requested: ToolCall; readonly output: string }
  /** An `ask_human` call a person answered: `output` is the answer. */
  | { readonly kind: 'answered'; readonly requested: ToolCall; readonly output: string }

/** Policy's verdict on a whole step: what to run, what to refuse, what to ask first, what to record. */
export interface StepPlan {
  readonly calls: ReadonlyArray<CallPlan>
  /** Requests a person must decide before anything of the step runs (the run pauses). */
  readonly pending: ReadonlyArray<Omit<NewApproval, 'created_at'>>
  /**
   * Questions (`ask_human`) waiting for a person's answer (kind `input`): the run pauses for them
   * once nothing else is pending (docs/policy.md, "Questions").
   */
  readonly questions: ReadonlyArray<Omit<NewApproval, 'created_at'>>
  /** Requests decided on the spot (`approval: auto`), recorded as decided. */
  readonly decided: ReadonlyArray<Omit<NewApproval, 'created_at'>>
  /** Refusals and on-the-spot decisions for the audit trail (without `at`). */
  readonly events: ReadonlyArray<Omit<NewPolicyEvent, 'at'>>
}

const payloadOf = (call: ToolCall): string => JSON.stringify({ name: call.name, arguments: call.arguments })

/** A pending request planned again, as it is stored (inserting it again is a no-op: it exists). */
const plannedAgain = ({ payload, edited_payload, ...row }: ApprovalRow): Omit<NewApproval, 'created_at'> => ({
  ...row,
  payload_json: JSON.stringify(payload),
  edited_payload_json: edited_payload === null ? null : JSON.stringify(edited_payload)
})

/**
 * Decides a step's tool calls before any of them runs: denied calls are refused, allowed ones
 * run, and `ask`s are answered by an existing decision, by `approval: auto`, or become pending
 * requests. Each call is judged by the act and target its tool's definition reads from it; a
 * call of an unknown tool, or one naming no target, is not judged (it runs, and the tool answers
 * what is wrong). Planning the whole step first means a pause never leaves a step half done.
 */
export const planStep = (input: {
  readonly runId: string
  readonly step: number
  readonly policy: CompiledPolicy
  readonly calls: ReadonlyArray<ToolCall>
  /** The catalogue's entry for each of `calls`, by position; looked up among the built-ins when omitted. */
  readonly tools?: ReadonlyArray<ToolDefinition | undefined> | undefined
  readonly approvals: ReadonlyArray<ApprovalRow>
  readonly mode: ApprovalMode
  readonly newId: () => string
}): StepPlan => {
  const calls: CallPlan[] = []
  const pending: Array<Omit<NewApproval, 'created_at'>> = []
  const questions: Array<Omit<NewApproval, 'created_at'>> = []
  const decided: Array<Omit<NewApproval, 'created_at'>> = []
  const events: Array<Omit<NewPolicyEvent, 'at'>> = []
  for (const [position, call] of input.calls.entries()) {
    const tool = input.tools === undefined ? builtinCatalogue.get(call.name) : input.tools[position]
    if (tool?.name === ASK_HUMAN) {
      calls.push(planQuestion(input, position, call, questions))
      continue
    }
    const toolAct = toolActOf(tool, call.arguments)
    if (toolAct === undefined) {
      calls.push({ kind: 'run', requested: call, call, tool })
      continue
    }
    // A tool judged by name and covered by no rule: a `read` tool is allowed, others ask (docs/policy.md).
    const decision = input.policy.check(toolAct.act, toolAct.target, tool?.effect === 'read' ? 'allow' : 'ask')
    const base = { run_id: input.runId, step: input.step, act: toolAct.act, target: toolAct.target, rule: decision.rule, layer: decision.layer }
    // A decision remembered with `approve --remember` is audited as such.
    const source = decision.layer === 'remembered' ? 'remembered' : 'policy'
    if (decision.decision === 'allow') {
      if (source === 'remembered') events.push({ ...base, kind: 'decision', decision: 'approved', source, request_id: null, performed_target: null })
      calls.push({ kind: 'run', requested: call, call, tool })
    } else if (decision.decision === 'deny') {
      events.push({ ...base, kind: 'refusal', decision: 'deny', source, request_id: null, performed_target: null })
      calls.push({ kind: 'refuse', requested: call, output: `Refused by policy: ${describeDecision(decision)}.` })
    } else {
      const existing = input.approvals.find((a) => a.tool_call_id === call.id)
      if (existing !== undefined && existing.status !== 'pending') {
        calls.push(planFromDecision(call, tool, existing))
      } else if (existing !== undefined) {
        pending.push(plannedAgain(existing))
      } else if (input.mode === 'auto') {
        const id = input.newId()
        decided.push({
          ...base,
          id,
          position,
          tool_call_id: call.id,
          payload_json: payloadOf(call),
          status: 'approved',
          source: 'auto',
          edited_payload_json: null,
          decided_at: null
        })
        events.push({ ...base, kind: 'decision', decision: 'approved', source: 'auto', request_id: id, performed_target: null })
        calls.push({ kind: 'run', requested: call, call, tool })
      } else {
        pending.push(newRequest(base, input.newId(), position, call))
      }
    }
  }
  return { calls, pending, questions, decided, events }
}

/** A request for the step's call at `position`, not decided yet: `base` says what it is about. */
const newRequest = (
  base: Pick<NewApproval, 'run_id' | 'step' | 'act' | 'target' | 'rule' | 'layer'> & Pick<Partial<NewApproval>, 'kind'>,
  id: string,
  position: number,
  call: ToolCall
): Omit<NewApproval, 'created_at'> => ({
  ...base,
  id,
  position,
  tool_call_id: call.id,
  payload_json: payloadOf(call),
  source: null,
  edited_payload_json: null,
  decided_at: null
})

/**
 * An `ask_human` call: answered by its request when a person answered it, else a question to
 * wait for (the one already stored, or a new one). Never decided by `approval: auto`.
 */
const planQuestion = (
  input: { readonly runId: string; readonly step: number; readonly approvals: ReadonlyArray<ApprovalRow>; readonly newId: () => string },
  position: number,
  call: ToolCall,
  questions: Array<Omit<NewApproval, 'created_at'>>
): CallPlan => {
  const decoded = decodeAskHumanArgs(call.arguments)
  if (Either.isLeft(decoded)) return { kind: 'refuse', requested: call, output: `Invalid arguments for ${ASK_HUMAN}: ${decoded.left}` }
  const existing = input.approvals.find((a) => a.tool_call_id === call.id && a.kind === 'input')
  if (existing?.status === 'approved') return { kind: 'answered', requested: call, output: existing.account ?? '' }
  if (existing?.status === 'denied') return { kind: 'refuse', requested: call, output: 'Nobody answered this question: go on without it.' }
  const question = { run_id: input.runId, step: input.step, kind: 'input', act: ASK_HUMAN, target: decoded.right.question, rule: ASK_HUMAN, layer: 'agent' }
  questions.push(existing !== undefined ? plannedAgain(existing) : newRequest(question, input.newId(), position, call))
  return { kind: 'refuse', requested: call, output: 'waiting for an answer' }
}

/**
 * How a decided request plays out: the approved (possibly edited) call runs, a denial is told.
 * An edit changes a call's arguments, never its tool (approval/decide.ts).
 */
const planFromDecision = (call: ToolCall, tool: ToolDefinition | undefined, approval: ApprovalRow): CallPlan => {
  if (approval.status === 'denied') {
    return { kind: 'refuse', requested: call, output: `Denied by ${approval.source ?? 'an approver'}: ${approval.act} ${approval.target} was not approved.` }
  }
  const edited = approval.edited_payload
  if (edited === null) return { kind: 'run', requested: call, call, tool }
  const performed: ToolCall = { id: call.id, name: edited.name, arguments: edited.arguments }
  return { kind: 'run', requested: call, call: performed, tool, note: `Approved with edits: ran ${edited.name} with ${edited.arguments} instead.` }
}
