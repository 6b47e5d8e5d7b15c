import { UsageError } from './usage-error.js'

/** The environment variable every driving command (run, resume, send, worker) reads. */
export const STORE_OUTAGE_ENV_VAR = 'AGENTVISOR_STORE_OUTAGE_MS'

/**
 * The `storeOutageMs` of a driving command (docs/durability.md, "A store outage"): `flag`
 * (`worker --store-outage-ms`) when given, else `AGENTVISOR_STORE_OUTAGE_MS`, else nothing (the
 * default, 60 s). Anything but a whole number of milliseconds >= 0 is a usage error naming it.
 */
export const storeOutageOption = (flag?: string | undefined): { readonly storeOutageMs?: number } => {
  const [name, text] = flag !== undefined ? ['--store-outage-ms', flag] : [STORE_OUTAGE_ENV_VAR, process.env[STORE_OUTAGE_ENV_VAR]]
  if (text === undefined || text.trim() === '') return {}
  const ms = Number(text)
  if (!Number.isInteger(ms) || ms < 0) throw new UsageError(`${name} must be a whole number of milliseconds, 0 or more (got "${text}")`)
  return { storeOutageMs: ms }
}
