import * as path from 'node:path'
import { isPostgresUrl } from './postgres/postgres-location.js'

/** The variable that names the database when no `--db` flag is given (docs/cli.md). */
export const DB_ENV_VAR = 'AGENTVISOR_DB'

/**
 * Where the store lives: the `--db` value, else `$AGENTVISOR_DB`, else
 * `<cwd>/.agentvisor/agentvisor.db`. Relative paths resolve against `cwd`; `:memory:` and a
 * PostgreSQL URL (`postgres://…`, `postgresql://…`) are kept as they are. An empty flag or
 * variable counts as not given.
 *
 * @example resolveDbPath(undefined, { AGENTVISOR_DB: 'runs.db' }, '/srv') // '/srv/runs.db'
 * @example resolveDbPath('postgres://app@db/runs') // 'postgres://app@db/runs'
 */
export function resolveDbPath(flag?: string, env: Readonly<Record<string, string | undefined>> = process.env, cwd: string = process.cwd()): string {
  const chosen = nonEmpty(flag) ?? nonEmpty(env[DB_ENV_VAR]) ?? path.join('.agentvisor', 'agentvisor.db')
  return chosen === ':memory:' || isPostgresUrl(chosen) ? chosen : path.resolve(cwd, chosen)
}

const nonEmpty = (value: string | undefined): string | undefined => (value === undefined || value.trim() === '' ? undefined : value)
