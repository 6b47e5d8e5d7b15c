import { ContractError, loadToolModules, type McpPool, type SecretSet, type TaskContract, type ToolCatalogue } from '@agentvisor/core'
import { Effect, Either } from 'effect'
import { availableTools, type RegisteredTool, registeredTool, runCatalogue } from '../driver/run-tools.js'

/** What the catalogues of one supervisor's runs are made of. */
export interface CatalogueDeps {
  /** The process's own tools (`SupervisorOptions.tools`). */
  readonly tools: ReadonlyArray<RegisteredTool>
  /** The process's MCP servers, started by the first run that names each. */
  readonly mcp: McpPool
  readonly env: NodeJS.ProcessEnv
  /** The secrets every run redacts: an MCP server's `fromEnv` values join them. */
  readonly secrets: SecretSet
}

/**
 * The catalogue of the agent `contract` runs: the process's tools, the task's modules (each
 * imported once per process) and its MCP servers' tools (each server started once per process);
 * a root's start checks the task's other agents too (docs/tools.md).
 */
export const makeRunCatalogues = (deps: CatalogueDeps): ((contract: TaskContract, checkAgents: boolean) => Effect.Effect<ToolCatalogue, ContractError>) => {
  // The tools of the process, made catalogue entries once.
  const registered = deps.tools.map(registeredTool)
  // Checked once, not at every start: the same for every run without tools of its own.
  const processTools = availableTools(registered)
  return (contract, checkAgents) => {
    const modules = contract.toolModules ?? []
    const servers = contract.mcpServers
    // A first-edition task (no modules, no servers) costs no Effect step here.
    if (modules.length === 0 && servers === undefined) return Either.flatMap(processTools, (available) => runCatalogue(available, contract, checkAgents))
    return Effect.gen(function* () {
      const moduleTools =
        modules.length === 0
          ? []
          : yield* Effect.mapError(loadToolModules(modules, contract.workspace), (error) => new ContractError({ message: error.message, field: error.field }))
      // Their `fromEnv` values join the secrets every run redacts.
      const handles = yield* Effect.mapError(
        deps.mcp.startAll(servers, { env: deps.env, secrets: deps.secrets }),
        (error) => new ContractError({ message: error.message, field: `mcpServers.${error.server}` })
      )
      const available = yield* availableTools(registered, [...moduleTools, ...handles.flatMap((handle) => handle.tools)])
      return yield* runCatalogue(available, contract, checkAgents)
    })
  }
}

/** The names of a catalogue's tools, as a contract records them (`startedWithTools`). */
export const toolNames = (tools: ToolCatalogue): ReadonlyArray<string> => tools.tools.map((tool) => tool.name)
