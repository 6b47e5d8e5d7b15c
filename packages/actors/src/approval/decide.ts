import { builtinCatalogue, type CompiledPolicy, describeDecision, escapeGlob, type ToolCatalogue, toolActOf } from '@agentvisor/core'
import {
  type ApprovalDecision,
  type ApprovalRow,
  type Database,
  type DecisionSource,
  type NewPolicyEvent,
  type NewRememberedRule,
  recordDecision,
  type StoreError
} from '@agentvisor/store'
import { Data, Effect } from 'effect'
import type { Kysely } from 'kysely'
import { EditRefusedError, RecoveryDecisionNeededError, RequestDecidedError } from '../errors.js'

/** How a person (or service) answers an approval request. */
export interface ApprovalAnswer {
  readonly decision: 'approve' | 'deny'
  /** Keep this decision for later runs of the same workspace. */
  readonly remember?: boolean | undefined
  /** Replacement arguments for the tool call: approve it as edited. */
  readonly edit?: Readonly<Record<string, unknown>> | undefined
}

/** A decision asked of the wrong kind of request (a programming error of the caller). */
export class ApprovalError extends Data.TaggedError('ApprovalError')<{ readonly message: string }> {}

/**
 * A decision written with its audit event (and the rule remembered, when given) in one transaction
 * (`recordDecision`); `RequestDecidedError` when another decision won, nothing written.
 */
const decided = (
  db: Kysely<Database>,
  request: ApprovalRow,
  decision: ApprovalDecision,
  event: NewPolicyEvent,
  remembered?: NewRememberedRule
): Effect.Effect<void, RequestDecidedError | StoreError> =>
  Effect.flatMap(recordDecision(db, request.id, decision, event, remembered), (won) =>
    won ? Effect.void : Effect.fail(new RequestDecidedError({ requestId: request.id }))
  )

/** The audit event of a decision on a request. */
const decisionEvent = (request: ApprovalRow, decision: string, source: DecisionSource, at: string, performedTarget: string | null): NewPolicyEvent => ({
  run_id: request.run_id,
  step: request.step,
  kind: 'decision',
  act: request.act,
  target: request.target,
  rule: request.rule,
  layer: request.layer,
  decision,
  source,
  request_id: request.id,
  performed_target: performedTarget,
  at
})

/** A pending request as an approver sees it. */
export interface ApprovalRequest {
  readonly id: string
  readonly runId: string
  readonly step: number
  readonly act: string
  readonly target: string
  readonly tool: string
  /** The raw arguments the model sent. */
  readonly arguments: string
  readonly rule: string
  readonly layer: string
}

export const approvalRequestOf = (row: ApprovalRow): ApprovalRequest => {
  const { payload } = row
  return {
    id: row.id,
    runId: row.run_id,
    step: row.step,
    act: row.act,
    target: row.target,
    tool: payload.name,
    arguments: payload.arguments,
    rule: row.rule,
    layer: row.layer
  }
}

/**
 * Records a decision on a pending request, with its audit event (and the remembered rule when
 * asked), in one transaction. An edit is checked against the policy again: it may not cross a
 * deny (`EditRefusedError`). Whoever decides first wins; a second decision fails with
 * `RequestDecidedError`.
 */
export const decideRequest = (input: {
  readonly db: Kysely<Database>
  readonly policy: CompiledPolicy
  /** The tools the run knows, whose definition judges an edit (the built-ins when omitted). */
  readonly tools?: ToolCatalogue | undefined
  readonly workspace: string
  readonly request: ApprovalRow
  readonly answer: ApprovalAnswer
  readonly source: DecisionSource
  readonly at: string
}): Effect.Effect<void, RecoveryDecisionNeededError | EditRefusedError | RequestDecidedError | StoreError> =>
  Effect.suspend((): Effect.Effect<void, RecoveryDecisionNeededError | EditRefusedError | RequestDecidedError | StoreError> => {
    const { request, answer } = input
    if (request.kind === 'recovery') return Effect.fail(new RecoveryDecisionNeededError({ runId: request.run_id, requestId: request.id }))
    const { payload } = request
    let editedPayloadJson: string | null = null
    let performedTarget: string | null = null
    if (answer.decision === 'approve' && answer.edit !== undefined) {
      let editedArguments: string
      try {
        editedArguments = JSON.stringify(answer.edit)
      } catch (cause) {
        // An approver's edit is any value: a cycle or a BigInt in it cannot be stored.
        return Effect.fail(new EditRefusedError({ reason: `the edited arguments are not JSON: ${cause instanceof Error ? cause.message : String(cause)}` }))
      }
      const edited = { name: payload.name, arguments: editedArguments }
      // A tool judged by name (a module's, an MCP server's, docs/policy.md) keeps its act and target
      // whatever its arguments, even where this process does not have the tool.
      const editedAct =
        request.act === 'tool'
          ? { act: 'tool' as const, target: payload.name }
          : toolActOf((input.tools ?? builtinCatalogue).get(payload.name), edited.arguments)
      if (editedAct === undefined) return Effect.fail(new EditRefusedError({ reason: `the edited arguments are not valid for ${payload.name}` }))
      const check = input.policy.check(editedAct.act, editedAct.target)
      if (check.decision === 'deny') return Effect.fail(new EditRefusedError({ reason: `the edited action is refused: ${describeDecision(check)}` }))
      editedPayloadJson = JSON.stringify(edited)
      if (editedAct.target !== request.target || editedAct.act !== request.act) performedTarget = editedAct.target
    }
    const status = answer.decision === 'approve' ? 'approved' : 'denied'
    return decided(
      input.db,
      request,
      { status, source: input.source, remember: answer.remember === true, editedPayloadJson, decidedAt: input.at },
      decisionEvent(request, status, input.source, input.at, performedTarget),
      answer.remember === true
        ? {
            workspace: input.workspace,
            act: request.act,
            pattern: escapeGlob(request.target),
            decision: status === 'approved' ? 'allow' : 'deny',
            run_id: request.run_id,
            created_at: input.at
          }
        : undefined
    )
  })

/** How an operator settles an exec that was interrupted after it started. */
export type RecoveryResolution = 'retry' | 'completed' | 'abort'

/**
 * Decides a recovery request: `retry` runs the exec once more, `completed` does not run it and
 * tells the model the operator's `account`, `abort` ends the run. Decidable once, audited.
 */
export const decideRecovery = (input: {
  readonly db: Kysely<Database>
  readonly request: ApprovalRow
  readonly resolution: RecoveryResolution
  readonly account?: string | undefined
  readonly source: DecisionSource
  readonly at: string
}): Effect.Effect<void, ApprovalError | RequestDecidedError | StoreError> => {
  const { request } = input
  if (request.kind !== 'recovery') return Effect.fail(new ApprovalError({ message: `request ${request.id} is not a recovery request` }))
  return decided(
    input.db,
    request,
    {
      status: input.resolution === 'abort' ? 'denied' : 'approved',
      source: input.source,
      remember: false,
      editedPayloadJson: null,
      decidedAt: input.at,
      resolution: input.resolution,
      account: input.account ?? null
    },
    decisionEvent(request, input.resolution, input.source, input.at, null)
  )
}
