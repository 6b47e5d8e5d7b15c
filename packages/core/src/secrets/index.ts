// A narrow entry (`@agentvisor/core/secrets`): redaction with no dependency at all, for the
// store's light `runs` entry and the CLI's output, which must not load Effect or the SDKs.
export { makeSecretSet, REDACTED, secretForms, type SecretSet } from './secret-set.js'
export { maskUrlCredentials } from './url-credentials.js'
