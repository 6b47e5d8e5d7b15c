import type { CommandSandbox } from '../contract/contract-fields.js'
import type { TaskContract } from '../contract/task-shape.js'
import { mcpSecretNames } from './mcp/mcp-server-spec.js'

/**
 * Variable names that look like credentials. Commands run by or for the model print into tool
 * results and verification feedback, which are stored in the trace; API keys must never reach
 * the trace (docs/task-file.md, "providers"), so they are not handed to those commands at all.
 */
const SECRET_NAME = /(API_?KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_?KEY)/i

/**
 * The environment for commands the model can influence (`exec`, `command` verification): the
 * host's environment minus variables whose names look like credentials and the variables
 * named in `secretNames` (a contract's `apiKeyEnv`s, whatever their names look like).
 *
 * @example
 * commandEnv({ PATH: '/bin', OPENAI_API_KEY: 'sk-...', RT_LLM: 'sk-...' }, ['RT_LLM']) // { PATH: '/bin' }
 */
export const commandEnv = (base: NodeJS.ProcessEnv = process.env, secretNames: ReadonlyArray<string> = []): NodeJS.ProcessEnv => {
  const hidden = new Set(secretNames)
  return Object.fromEntries(Object.entries(base).filter(([name]) => !hidden.has(name) && !SECRET_NAME.test(name)))
}

/** How the commands the model can influence run (docs/task-file.md, "sandbox"). */
export interface CommandSettings {
  /** The command's environment; the host's minus credential-like names when omitted. */
  readonly env?: NodeJS.ProcessEnv | undefined
  /** bubblewrap confinement; unconfined when omitted. */
  readonly sandbox?: CommandSandbox | undefined
}

/**
 * The variables that hold a contract's secrets: every provider's `apiKeyEnv`, its agents'
 * providers' too, and the `fromEnv` names of its MCP servers (docs/tools.md).
 */
export const contractSecretNames = (contract: Pick<TaskContract, 'providers'> & Partial<Pick<TaskContract, 'agents' | 'mcpServers'>>): string[] => {
  const providers = [...contract.providers, ...Object.values(contract.agents ?? {}).flatMap((agent) => agent.providers)]
  const names = new Set(providers.flatMap((provider) => (provider.apiKeyEnv === undefined ? [] : [provider.apiKeyEnv])))
  for (const name of mcpSecretNames(contract.mcpServers)) names.add(name)
  return [...names]
}

/**
 * The settings of a run's commands: the host's environment without the contract's key
 * variables (nor `moreSecretNames`, such as MCP `fromEnv` names) and the contract's sandbox.
 *
 * @example
 * const settings = runCommandSettings(contract)
 * yield* runTool(ws, call, settings)
 */
export const runCommandSettings = (
  contract: Pick<TaskContract, 'providers' | 'sandbox'> & Partial<Pick<TaskContract, 'agents' | 'mcpServers'>>,
  moreSecretNames: ReadonlyArray<string> = [],
  base: NodeJS.ProcessEnv = process.env
): CommandSettings => {
  const secretNames = [...contractSecretNames(contract), ...moreSecretNames]
  let env: NodeJS.ProcessEnv | undefined
  return {
    // Copied on first use: a run whose tools only read files never filters the environment.
    get env() {
      env ??= commandEnv(base, secretNames)
      return env
    },
    ...(contract.sandbox === undefined ? {} : { sandbox: contract.sandbox })
  }
}
