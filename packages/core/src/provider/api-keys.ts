import type { ProviderConfig } from '../contract/contract-fields.js'
import { quoteName } from '../contract/quote-name.js'

/** What the providers of a task lack before it starts: a reason to refuse it, and warnings. */
export interface UnsetKeys {
  /** One line naming the variable, when the chain's first provider lacks its key. */
  readonly refused?: string | undefined
  /** One line per later provider that lacks its key. */
  readonly warnings: ReadonlyArray<string>
}

const hasKey = (config: ProviderConfig, env: Readonly<Record<string, string | undefined>>): boolean =>
  config.apiKeyEnv === undefined || (env[config.apiKeyEnv] ?? '').trim() !== ''

/**
 * Checks, before a run exists, that its chain's API keys are set (docs/task-file.md, "API keys").
 * A missing key is an auth failure at dispatch, and a run never falls over on one: the first
 * provider lacking its key (every run's first call goes to it) refuses the task; a later one
 * lacking it is a warning, since only a run that falls over to it would fail there. Keys are
 * still read at each dispatch (a key set later, or rotated, is used).
 *
 * @example unsetApiKeys(contract.providers, process.env).refused // 'providers.0.apiKeyEnv: OPENAI_API_KEY is not set ...'
 */
export const unsetApiKeys = (providers: ReadonlyArray<ProviderConfig>, env: Readonly<Record<string, string | undefined>>, field = 'providers'): UnsetKeys => {
  const warnings: string[] = []
  for (const [i, config] of providers.entries()) {
    if (hasKey(config, env)) continue
    const what = `${field}.${i}.apiKeyEnv: ${config.apiKeyEnv} is not set (provider ${quoteName(config.name)} needs it)`
    if (i === 0) return { refused: `${what}: set it in the environment`, warnings }
    warnings.push(`${what}; a run that falls over to it fails there (kind auth)`)
  }
  return { warnings }
}
