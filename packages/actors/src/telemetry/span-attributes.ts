/** The names of the spans agentvisor emits (docs/telemetry.md). */
export const SpanName = {
  /** One drive of a run by one process: a start, or a resume. */
  run: 'agentvisor.run',
  /** One step: the model call (with its attempts) and the tools it asked for. */
  step: 'agentvisor.step',
  /** One model-call attempt: one receipt row. */
  attempt: 'agentvisor.attempt',
  /** One tool call the driver performed. */
  tool: 'agentvisor.tool'
} as const
export type SpanName = (typeof SpanName)[keyof typeof SpanName]

/**
 * Attribute keys. OpenTelemetry semantic conventions where one exists (`http.*`, `gen_ai.*`),
 * `agentvisor.*` otherwise. None carries a goal, a prompt, a model answer, a tool's output, a
 * file's content, an error message or a credential: only ids, names, counts and kinds.
 */
export const SpanAttribute = {
  runId: 'agentvisor.run.id',
  parentId: 'agentvisor.run.parent_id',
  rootId: 'agentvisor.run.root_id',
  resumed: 'agentvisor.run.resumed',
  startState: 'agentvisor.run.start_state',
  status: 'agentvisor.run.status',
  steps: 'agentvisor.run.steps',
  /** Set when the driver let go without an end (the runtime closed): the run stays resumable. */
  interrupted: 'agentvisor.run.interrupted',
  errorKind: 'agentvisor.error.kind',
  errorProvider: 'agentvisor.error.provider',
  errorHttpStatus: 'agentvisor.error.http_status',
  step: 'agentvisor.step.number',
  attempt: 'agentvisor.attempt.index',
  provider: 'agentvisor.provider',
  providerKind: 'agentvisor.provider.kind',
  operation: 'gen_ai.operation.name',
  model: 'gen_ai.request.model',
  reason: 'agentvisor.attempt.reason',
  outcome: 'agentvisor.attempt.outcome',
  httpStatus: 'http.response.status_code',
  latencyMs: 'agentvisor.attempt.latency_ms',
  ttftMs: 'agentvisor.attempt.ttft_ms',
  tokensIn: 'gen_ai.usage.input_tokens',
  tokensOut: 'gen_ai.usage.output_tokens',
  /** On the run span: its own calls' totals and dollars (docs/task-file.md, "Usage and budgets"). */
  runTokensIn: 'agentvisor.run.usage.input_tokens',
  runTokensOut: 'agentvisor.run.usage.output_tokens',
  runCostUsd: 'agentvisor.run.usage.cost_usd',
  treeTokensIn: 'agentvisor.run.tree_usage.input_tokens',
  treeTokensOut: 'agentvisor.run.tree_usage.output_tokens',
  treeCostUsd: 'agentvisor.run.tree_usage.cost_usd',
  toolName: 'agentvisor.tool.name',
  /** The path or command the call is about; never the content written or the output. */
  toolTarget: 'agentvisor.tool.target',
  toolOk: 'agentvisor.tool.ok',
  /** `builtin`, `module` or `mcp:<server>` (docs/tools.md). */
  toolSource: 'agentvisor.tool.source',
  /** `read`, `idempotent` or `effect`. */
  toolEffect: 'agentvisor.tool.effect',
  transitionSeq: 'agentvisor.transition.seq',
  transitionFrom: 'agentvisor.transition.from',
  transitionEvent: 'agentvisor.transition.event',
  transitionTo: 'agentvisor.transition.to'
} as const
export type SpanAttribute = (typeof SpanAttribute)[keyof typeof SpanAttribute]

/** The span event recorded on the run span for each persisted transition. */
export const TRANSITION_EVENT = 'agentvisor.transition'
