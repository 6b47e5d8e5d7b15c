import { Either, Schema } from 'effect'
import { quoteName } from './quote-name.js'
import { ContractError } from '../errors.js'
import { compilePolicy } from '../policy/policy.js'
import { Limits, NonBlankString, PolicyLayer, PositiveInt, ProviderConfig, VerifySpec } from './contract-fields.js'
import { compileJsonSchema } from './output-schema.js'
import { McpServers } from '../tools/mcp/mcp-server-spec.js'

/**
 * Agents as data (docs/agents.md): what one agent of a task is (its instructions, model settings,
 * providers, tools, delegates, result schema, policy and limits). The task's own top-level fields
 * are its root agent's; `agents` names the others, which runs start as children.
 */

/** Agent names are tool-name-like: they appear in `spawn_child`'s description and in traces. */
const AGENT_NAME = /^[a-zA-Z0-9_-]{1,64}$/
export const AgentName = Schema.String.pipe(Schema.filter((s) => AGENT_NAME.test(s) || 'must be 1-64 letters, digits, _ or -'))

/** Sampling settings passed to every provider of an agent (docs/agents.md, "Model settings"). */
export const ModelSettings = Schema.Struct({
  temperature: Schema.optional(Schema.Number.pipe(Schema.between(0, 2))),
  topP: Schema.optional(Schema.Number.pipe(Schema.between(0, 1))),
  /** The most tokens one answer may have; Anthropic's required `max_tokens` is 4096 without it. */
  maxTokens: Schema.optional(PositiveInt)
})
export type ModelSettings = typeof ModelSettings.Type

/** A JSON Schema of `"type": "object"` that Ajv compiles: the shape of an agent's result. */
export const OutputSchema = Schema.Record({ key: Schema.String, value: Schema.Unknown }).pipe(
  Schema.filter((schema) => Either.match(compileJsonSchema(schema, true), { onLeft: (reason) => reason, onRight: () => true }))
)
export type OutputSchema = typeof OutputSchema.Type

/**
 * A name or a glob over the tool catalogue (`read_file`, `docs__*`). Which names exist is known
 * only once a run's tool modules are loaded and its MCP servers listed: the run's start checks
 * them (docs/tools.md).
 */
export const ToolPattern = NonBlankString

const uniqueProviderNames = (
  providers: ReadonlyArray<{ readonly name: string }> | undefined
): { path: [string, number, string]; message: string } | undefined => {
  const seen = new Set<string>()
  for (const [i, p] of (providers ?? []).entries()) {
    if (seen.has(p.name)) return { path: ['providers', i, 'name'], message: `duplicates provider name ${quoteName(p.name)}` }
    seen.add(p.name)
  }
  return undefined
}

const agentSpecFields = {
  /** Shown to the agents that may delegate to this one, in `spawn_child`'s description. */
  description: Schema.optional(NonBlankString),
  instructions: Schema.optional(NonBlankString),
  /** Its fallback chain; the task's when omitted. */
  providers: Schema.optional(Schema.NonEmptyArray(ProviderConfig)),
  model: Schema.optional(ModelSettings),
  tools: Schema.optional(Schema.Array(ToolPattern)),
  delegates: Schema.optional(Schema.Array(AgentName)),
  output: Schema.optional(OutputSchema),
  /** Layers added to the task's (which bind every agent): an agent's policy only restricts. */
  policy: Schema.optional(Schema.Struct({ layers: Schema.Array(PolicyLayer) })),
  /** Never above its parent's: a child's limits are the smaller of the two. */
  limits: Schema.optional(Limits),
  verify: Schema.optional(VerifySpec)
}

/** One entry of a task's `agents`, as written. */
export const AgentSpec = Schema.Struct(agentSpecFields).pipe(Schema.filter((agent) => uniqueProviderNames(agent.providers)))
export type AgentSpec = typeof AgentSpec.Type

/** An agent as a contract keeps it: its providers are the task's when it names none. */
export const AgentDefinition = Schema.Struct({ ...agentSpecFields, providers: Schema.NonEmptyArray(ProviderConfig) })
export type AgentDefinition = typeof AgentDefinition.Type

/** The agent fields a task (or an agent) has at its top level, as the task file's Schema reads them. */
export const AgentFields = {
  instructions: Schema.optional(NonBlankString),
  model: Schema.optional(ModelSettings),
  tools: Schema.optional(Schema.Array(ToolPattern)),
  delegates: Schema.optional(Schema.Array(AgentName)),
  output: Schema.optional(OutputSchema),
  agents: Schema.optional(Schema.Record({ key: AgentName, value: AgentSpec })),
  toolModules: Schema.optional(Schema.Array(NonBlankString)),
  /** The task's MCP servers (docs/tools.md, "MCP servers"); their tools are `<server>__<tool>`. */
  mcpServers: Schema.optional(McpServers)
}

/** The agent fields of a stored contract (the store decodes its contract column with them). */
export const StoredAgentFields = {
  ...AgentFields,
  agents: Schema.optional(Schema.Record({ key: AgentName, value: AgentDefinition })),
  agent: Schema.optional(AgentName),
  startedWithTools: Schema.optional(Schema.Array(Schema.String))
}

/** What a task says of its agents, before they are checked against one another. */
interface AgentsOfTask {
  readonly delegates?: ReadonlyArray<string> | undefined
  readonly agents?: Readonly<Record<string, AgentSpec>> | undefined
  readonly policy?: { readonly layers: ReadonlyArray<PolicyLayer> } | undefined
}

/**
 * Checks what the Schema cannot see field by field: every delegate names an agent of the task,
 * and every agent's policy compiles together with the task's layers (which bind it), with no
 * layer name taken twice. Left: a `ContractError` naming the field.
 */
export const checkAgents = (task: AgentsOfTask, source: string | undefined): ContractError | undefined => {
  const agents = task.agents ?? {}
  const names = Object.keys(agents)
  const unknownDelegate = (delegates: ReadonlyArray<string> | undefined, at: string): ContractError | undefined => {
    for (const [i, name] of (delegates ?? []).entries()) {
      if (Object.hasOwn(agents, name)) continue
      const field = `${at}delegates.${i}`
      const known = names.length === 0 ? 'the task defines no agents' : `the task's agents are ${names.join(', ')}`
      return new ContractError({ message: `${field}: unknown agent ${quoteName(name)} (${known})`, field, source })
    }
    return undefined
  }
  const top = unknownDelegate(task.delegates, '')
  if (top !== undefined) return top
  const taskLayers = task.policy?.layers ?? []
  for (const [name, agent] of Object.entries(agents)) {
    const own = unknownDelegate(agent.delegates, `agents.${name}.`)
    if (own !== undefined) return own
    // A layer the task has already, the very same, is the agent's own inherited: a delegate's
    // contract holds its parent's layers with its agent's added (docs/agents.md, "Delegation").
    const inherited = new Set(taskLayers.map((layer) => JSON.stringify(layer)))
    const layers = (agent.policy?.layers ?? []).filter((layer) => !inherited.has(JSON.stringify(layer)))
    if (layers.length === 0) continue
    const compiled = compilePolicy([...taskLayers, ...layers])
    if (Either.isLeft(compiled)) {
      // The combined list's indexes past the task's own are the agent's.
      const field = (compiled.left.field ?? '').replace(/^policy\.layers\.(\d+)/, (whole, index: string) =>
        Number(index) < taskLayers.length ? whole : `agents.${name}.policy.layers.${Number(index) - taskLayers.length}`
      )
      const message = compiled.left.message.replace(compiled.left.field ?? '\u0000', field)
      return new ContractError({ message, field, source })
    }
  }
  return undefined
}

/** The task's agents with their providers filled in from the task's (what a contract keeps). */
export const agentDefinitions = (
  agents: Readonly<Record<string, AgentSpec>>,
  providers: readonly [ProviderConfig, ...ProviderConfig[]]
): Readonly<Record<string, AgentDefinition>> =>
  Object.fromEntries(Object.entries(agents).map(([name, agent]) => [name, { ...agent, providers: agent.providers ?? providers }]))
