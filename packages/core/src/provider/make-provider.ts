import { Effect } from 'effect'
import { quoteName } from '../contract/quote-name.js'
import type { ProviderConfig } from '../contract/contract-fields.js'
import { ProviderError } from '../errors.js'
import { makeAnthropicProvider } from './anthropic.js'
import { makeOpenAIProvider } from './openai.js'
import type { Provider } from './provider.js'
import type { SecretSet } from '../secrets/secret-set.js'
import type { ModelSettings } from '../contract/agent-spec.js'
import { makeScriptedProvider } from './scripted.js'

/**
 * Builds the adapter a task file's provider entry names. The API key is read from
 * `env[apiKeyEnv]` at each dispatch, never at construction: a key set (or rotated) after the run
 * started is used, and a missing one fails that dispatch as `auth`, naming the variable only.
 * Each key read is added to `secrets` (raw and trimmed) before it is sent, so whatever echoes it
 * later is redacted (docs/task-file.md, "API keys"). `settings` are the agent's model settings,
 * sent with every request (docs/agents.md).
 *
 * @example
 * const provider = makeProvider({ name: 'primary', kind: 'openai', model: 'gpt-4o-mini', apiKeyEnv: 'OPENAI_API_KEY' }, process.env)
 */
export const makeProvider = (config: ProviderConfig, env: NodeJS.ProcessEnv, secrets?: SecretSet, settings?: ModelSettings): Provider => {
  switch (config.kind) {
    case 'scripted':
      return makeScriptedProvider({ name: config.name, steps: config.steps ?? [], stream: config.stream })
    case 'openai':
      return withLazyKey(config, config.kind, env, (model, apiKey) =>
        makeOpenAIProvider({ name: config.name, model, baseUrl: config.baseUrl, apiKey, stream: config.stream, secrets, settings })
      )
    case 'anthropic':
      return withLazyKey(config, config.kind, env, (model, apiKey) =>
        makeAnthropicProvider({ name: config.name, model, baseUrl: config.baseUrl, apiKey, stream: config.stream, secrets, settings })
      )
  }
}

const withLazyKey = (
  config: ProviderConfig,
  kind: 'openai' | 'anthropic',
  env: NodeJS.ProcessEnv,
  build: (model: string, apiKey: string | undefined) => Provider
): Provider => {
  // One SDK client per distinct key: rebuilding it per dispatch would drop its connection pool.
  let built: { readonly apiKey: string | undefined; readonly provider: Provider } | undefined
  const fail = (kind: 'auth' | 'request', message: string) => Effect.fail(new ProviderError({ kind, provider: config.name, message }))
  return {
    name: config.name,
    kind,
    chat: (request) =>
      Effect.suspend(() => {
        // The contract's schema requires a model for these kinds; this guards hand-built configs.
        if (config.model === undefined) return fail('request', `provider ${quoteName(config.name)} has no model`)
        let apiKey: string | undefined
        if (config.apiKeyEnv !== undefined) {
          apiKey = env[config.apiKeyEnv]
          // Whitespace alone is no key; the adapter trims the rest (and registers the raw value).
          if (apiKey === undefined || apiKey.trim() === '') return fail('auth', `environment variable ${config.apiKeyEnv} is not set`)
        }
        if (built === undefined || built.apiKey !== apiKey) built = { apiKey, provider: build(config.model, apiKey) }
        return built.provider.chat(request)
      })
  }
}
