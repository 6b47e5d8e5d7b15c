import { Either } from 'effect'
import { quoteName } from '../contract/quote-name.js'
import type { AgentDefinition, OutputSchema } from '../contract/agent-spec.js'
import { ContractError } from '../errors.js'
import { compileGlob, GlobMode } from '../policy/glob.js'
import { spawnChildDefinition } from './builtin-tools.js'
import { FINAL_ANSWER, finalAnswerTool } from './final-answer.js'
import { builtinCatalogue, makeToolCatalogue, type ToolCatalogue } from './tool-catalogue.js'
import type { ToolDefinition } from './tool-definition.js'
import { SPAWN_CHILD_SPEC } from './tool-specs.js'

/** An agent's tools when its `tools` is omitted: the first edition's built-ins (docs/agents.md). */
export const DEFAULT_AGENT_TOOLS: ReadonlyArray<string> = ['read_file', 'write_file', 'list_dir', 'exec', 'spawn_child']

/** What of an agent decides its tools. */
export interface AgentTools {
  readonly tools?: ReadonlyArray<string> | undefined
  readonly delegates?: ReadonlyArray<string> | undefined
  readonly output?: OutputSchema | undefined
  /** The task's agents: a delegate's description is shown in `spawn_child`'s. */
  readonly agents?: Readonly<Record<string, AgentDefinition>> | undefined
}

/**
 * The catalogue of one agent: every tool of `available` (the built-ins, then the process's and
 * the task's own tools, docs/tools.md) whose name one of the agent's `tools` patterns matches, in
 * `available`'s order; `spawn_child` whenever it has delegates (listing them); `final_answer`
 * whenever it has an `output`. A pattern that matches no tool is a `ContractError` naming it
 * (`field` is where the agent is: '' for the task's own, `agents.<name>.` for another).
 */
export const agentCatalogue = (available: ReadonlyArray<ToolDefinition>, agent: AgentTools, field = ''): Either.Either<ToolCatalogue, ContractError> => {
  const patterns = agent.tools ?? DEFAULT_AGENT_TOOLS
  const delegates = agent.delegates ?? []
  // A task that says nothing of tools gets the very catalogue of the first edition.
  if (agent.tools === undefined && delegates.length === 0 && agent.output === undefined) return Either.right(builtinCatalogue)
  const chosen = new Set<string>()
  for (const [i, pattern] of patterns.entries()) {
    const at = `${field}tools.${i}`
    const glob = compileGlob(pattern, GlobMode.path)
    if (Either.isLeft(glob)) return Either.left(new ContractError({ message: `${at}: invalid glob ${quoteName(pattern)}: ${glob.left.message}`, field: at }))
    const matched = available.filter((tool) => tool.name !== FINAL_ANSWER && glob.right(tool.name))
    if (matched.length === 0) {
      const names = available.filter((tool) => tool.name !== FINAL_ANSWER).map((tool) => tool.name)
      return Either.left(new ContractError({ message: `${at}: no tool matches ${quoteName(pattern)} (the tools are ${names.join(', ')})`, field: at }))
    }
    for (const tool of matched) chosen.add(tool.name)
  }
  // Delegating is what spawn_child is for: an agent with delegates has it, however its tools read.
  if (delegates.length > 0) chosen.add(spawnChildDefinition.name)
  const tools = available
    .filter((tool) => chosen.has(tool.name))
    .map((tool) => (tool.name === spawnChildDefinition.name && delegates.length > 0 ? delegating(delegates, agent.agents ?? {}) : tool))
  if (agent.output !== undefined) tools.push(finalAnswerTool(agent.output))
  return Either.mapLeft(makeToolCatalogue(tools), (error) => new ContractError({ message: `${field}${error.message}`, field: `${field}tools` }))
}

/**
 * `spawn_child` for an agent with delegates: the description lists them with their own
 * descriptions, and `agent` names which one runs the child (docs/agents.md, "Delegation").
 */
const delegating = (delegates: ReadonlyArray<string>, agents: Readonly<Record<string, AgentDefinition>>): ToolDefinition => {
  const listed = delegates.map((name) => `${name}${agents[name]?.description !== undefined ? `: ${agents[name]!.description}` : ''}`).join('; ')
  const parameters = SPAWN_CHILD_SPEC.parameters as { readonly properties: Readonly<Record<string, unknown>> }
  return {
    ...spawnChildDefinition,
    spec: {
      ...SPAWN_CHILD_SPEC,
      description: `${SPAWN_CHILD_SPEC.description} Give \`agent\` to have one of these agents do it (without it, the child is an agent like you): ${listed}.`,
      parameters: {
        ...SPAWN_CHILD_SPEC.parameters,
        properties: {
          agent: { type: 'string', enum: [...delegates], description: 'The agent that works on the goal; its result comes back as JSON.' },
          ...parameters.properties
        }
      }
    }
  }
}
