import { maskUrlCredentials } from '@agentvisor/core/secrets'

/**
 * Whether a store location names a PostgreSQL server (`postgres://` or `postgresql://`, in any
 * case) rather than a SQLite file.
 */
export const isPostgresUrl = (location: string): boolean => /^postgres(?:ql)?:\/\//i.test(location)

/**
 * The URL with its password shown as `***`, for messages, logs and `Store.file`: anything the
 * CLI prints, the inspector serves or an error carries. The one masker of URL credentials
 * (`maskUrlCredentials` of core, docs/deploy.md), under the name the store has always used.
 *
 * @example redactPassword('postgres://app:s3cret@db:5432/runs') // 'postgres://app:***@db:5432/runs'
 */
export const redactPassword = (url: string): string => maskUrlCredentials(url)
