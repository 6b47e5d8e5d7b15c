import { existsSync } from 'node:fs'
// The light entry `agentvisor runs` starts on: no Kysely.
import { resolveDbPath } from '@agentvisor/store/runs'
import { UsageError } from './usage-error.js'

/**
 * The store of a command about runs that exist already (`runs`, `show`, `watch`, `inspect`,
 * `approve`, `answer`, `cancel`, `send`, `resume`): a SQLite file that is not there is a usage
 * error naming the path (exit 2), not a new empty store that hides a mistyped `--db` (docs/cli.md).
 * A PostgreSQL URL is checked by connecting.
 */
export const existingStorePath = (flag: string | undefined): string => {
  const location = resolveDbPath(flag)
  if (location === ':memory:' || /^postgres(ql)?:\/\//i.test(location) || existsSync(location)) return location
  throw new UsageError(`no store at ${location}: nothing has run with it yet (check --db, or $AGENTVISOR_DB)`)
}
