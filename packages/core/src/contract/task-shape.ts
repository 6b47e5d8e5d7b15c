import { Schema } from 'effect'
import type { FallbackLink } from '../provider/fallback.js'
import type { McpServers } from '../tools/mcp/mcp-server-spec.js'
import { type AgentDefinition, AgentFields, AgentName, type ModelSettings, type OutputSchema } from './agent-spec.js'
import {
  ApprovalMode,
  ChildLimits,
  type CommandSandbox,
  Limits,
  Lineage,
  NonBlankString,
  PolicyLayer,
  Pricing,
  ProviderConfig,
  SandboxSpec,
  VerifySpec
} from './contract-fields.js'
import { quoteName } from './quote-name.js'

// A task's shapes: as written (`TaskFile`), as the TypeScript API takes it (`TaskInput`), and
// validated (`TaskContract`). Apart from task-contract.ts, which builds a contract, so that the
// checks the builder calls (contract-check.ts) can name these types without importing it.

/** The task file exactly as written (before defaults and path resolution). */
export const TaskFile = Schema.Struct({
  goal: NonBlankString,
  workspace: NonBlankString,
  providers: Schema.NonEmptyArray(ProviderConfig),
  verify: Schema.optional(VerifySpec),
  limits: Schema.optional(Limits),
  policy: Schema.optional(Schema.Struct({ layers: Schema.Array(PolicyLayer) })),
  approval: Schema.optional(ApprovalMode),
  children: Schema.optional(ChildLimits),
  sandbox: Schema.optional(SandboxSpec),
  lineage: Schema.optional(Lineage),
  /** Dollars per million tokens by model (docs/task-file.md, "Usage and budgets"). */
  pricing: Schema.optional(Pricing),
  // The root agent's own fields, and the task's other agents (docs/agents.md).
  ...AgentFields,
  /** The agent a child run runs: set by agentvisor for delegated children, never in a task. */
  agent: Schema.optional(AgentName),
  /** Set by agentvisor on a stored contract, never in a task. */
  startedWithTools: Schema.optional(Schema.Array(Schema.String))
}).pipe(
  Schema.filter((t) => {
    const seen = new Set<string>()
    for (const [i, p] of t.providers.entries()) {
      if (seen.has(p.name)) return { path: ['providers', i, 'name'], message: `duplicates provider name ${quoteName(p.name)}` }
      seen.add(p.name)
    }
    return undefined
  })
)
export type TaskFile = typeof TaskFile.Type

/**
 * A task as the TypeScript API takes it (`Agentvisor.run`/`start`, docs/typescript-api.md): the
 * task file's shape, typed (agents, tools, MCP servers and output schemas included), with a
 * providers chain that may nest (`fallback`). The fields only agentvisor sets are not part of it.
 *
 * @example
 * const task = { goal: 'Write DONE into out.txt', workspace: 'ws', providers: [main] } satisfies TaskInput
 */
export type TaskInput = Omit<Schema.Schema.Encoded<typeof TaskFile>, 'providers' | 'lineage' | 'agent' | 'startedWithTools'> & {
  readonly providers: ReadonlyArray<FallbackLink>
}

/** A validated task: defaults applied, the workspace an absolute path. Built once, read everywhere. */
export interface TaskContract {
  readonly goal: string
  readonly workspace: string
  readonly providers: readonly [ProviderConfig, ...ProviderConfig[]]
  readonly verify?: VerifySpec | undefined
  readonly limits: Limits
  readonly policy: { readonly layers: ReadonlyArray<PolicyLayer> }
  readonly approval: ApprovalMode
  readonly children: ChildLimits
  /** Absent when commands run unconfined (`exec: "none"`, the default). */
  readonly sandbox?: CommandSandbox | undefined
  /** Absent for a root run. */
  readonly lineage?: Lineage | undefined
  /** Dollars per million tokens by model; kept by every run of the tree. */
  readonly pricing?: Pricing | undefined
  // The second edition's agents (docs/agents.md). All absent for a task without them, which
  // runs exactly as before: the built-in tools, agentvisor's own system prompt.
  /** The agent this run runs (a delegated child's); absent for the task's own, root agent. */
  readonly agent?: string | undefined
  /** Added to agentvisor's own system prompt. */
  readonly instructions?: string | undefined
  readonly model?: ModelSettings | undefined
  /** Names or globs over the tool catalogue; absent: the first edition's built-ins. */
  readonly tools?: ReadonlyArray<string> | undefined
  /** The agents this one may start with `spawn_child`. */
  readonly delegates?: ReadonlyArray<string> | undefined
  /** The JSON Schema of the run's result, given through `final_answer`. */
  readonly output?: OutputSchema | undefined
  /** Every agent of the task, kept by every run of its tree: a delegate runs its definition from here. */
  readonly agents?: Readonly<Record<string, AgentDefinition>> | undefined
  /** Absolute paths of the task's tool modules. */
  readonly toolModules?: ReadonlyArray<string> | undefined
  /** The task's MCP servers; a stdio server's `cwd` made absolute (the task file's folder by default). */
  readonly mcpServers?: McpServers | undefined
  /**
   * The tools a run's agent had when it started, recorded by agentvisor for a task with tools of
   * its own: a resumed run is told what changed (docs/tools.md, "The catalogue").
   */
  readonly startedWithTools?: ReadonlyArray<string> | undefined
}
