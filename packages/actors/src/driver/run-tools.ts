import {
  agentCatalogue,
  ASK_HUMAN,
  askHumanDefinition,
  BUILTIN_TOOLS,
  catalogueToolOf,
  type DefinedTool,
  isDefinedTool,
  ContractError,
  FINAL_ANSWER,
  makeToolCatalogue,
  type TaskContract,
  type ToolCatalogue,
  type ToolDefinition,
  quoteName
} from '@agentvisor/core'
import { Either } from 'effect'

/** Names agentvisor offers by itself to the agents that need them: no tool of a team may take them. */
const RESERVED: ReadonlySet<string> = new Set([FINAL_ANSWER, ASK_HUMAN])

/** A tool given to the process (`Agentvisor.open({ tools })`): a `defineTool` value or a catalogue entry. */
export type RegisteredTool = DefinedTool | ToolDefinition

/** The catalogue entry of a registered tool (a `defineTool` value becomes a `module` tool). */
export const registeredTool = (tool: RegisteredTool): ToolDefinition => (isDefinedTool(tool) ? catalogueToolOf(tool) : tool)

/**
 * Every tool a run of this process may be offered, in catalogue order: the built-ins, `ask_human`
 * (offered only to an agent whose `tools` name it), then the tools registered with the process
 * (`Agentvisor.open({ tools })`, `worker --tools`), then the task's own (docs/tools.md). Two tools
 * of one name are a `ContractError` naming it.
 */
export const availableTools = (
  registered: ReadonlyArray<ToolDefinition>,
  taskTools: ReadonlyArray<ToolDefinition> = []
): Either.Either<ReadonlyArray<ToolDefinition>, ContractError> => {
  const all = [...BUILTIN_TOOLS, askHumanDefinition, ...registered, ...taskTools]
  const reserved = [...registered, ...taskTools].find((tool) => RESERVED.has(tool.name))
  if (reserved !== undefined) {
    return Either.left(
      new ContractError({
        message: `tools: ${quoteName(reserved.name)} is agentvisor's own tool name; give the ${reserved.source} tool another`,
        field: 'tools'
      })
    )
  }
  return Either.map(makeToolCatalogue(all), () => all)
}

/**
 * The catalogue of the agent `contract` runs. A root run's start also checks every other agent of
 * the task against the same tools, so a pattern that matches nothing stops the task at once
 * (exit 2 from the CLI) rather than a child much later.
 */
export const runCatalogue = (
  available: ReadonlyArray<ToolDefinition>,
  contract: TaskContract,
  checkAgents: boolean
): Either.Either<ToolCatalogue, ContractError> => {
  const own = agentCatalogue(available, contract)
  if (Either.isLeft(own) || !checkAgents) return own
  for (const [name, agent] of Object.entries(contract.agents ?? {})) {
    const checked = agentCatalogue(available, { ...agent, agents: contract.agents }, `agents.${name}.`)
    if (Either.isLeft(checked)) return Either.left(checked.left)
  }
  return own
}
