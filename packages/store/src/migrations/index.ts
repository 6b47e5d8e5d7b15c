import { type Kysely, type Migration, type MigrationProvider, sql } from 'kysely'
import * as initial from './2026-11-29T120000-initial.js'
import * as policy from './2026-11-29T150000-policy.js'
import * as durability from './2026-11-29T170000-durability.js'
import * as runContracts from './2026-11-29T200000-run-contracts.js'
import * as clusteredTables from './2026-11-29T210000-clustered-tables.js'
import * as compactJournal from './2026-12-01T120000-compact-journal.js'
import * as postgresRunWriter from './2026-12-01T130000-postgres-run-writer.js'
import * as postgresCommitArguments from './2026-12-01T150000-postgres-commit-arguments.js'
import * as runLog from './2026-12-01T160000-run-log.js'
import * as postgresStepCommit from './2026-12-01T170000-postgres-step-commit.js'
import * as postgresDeferredHead from './2026-12-02T010000-postgres-deferred-head.js'
import * as runUsage from './2026-12-02T080000-run-usage.js'
import * as awaitingInput from './2026-12-02T090000-awaiting-input.js'
import * as runForks from './2026-12-02T110000-run-forks.js'
import * as postgresStepKeys from './2026-12-02T160000-postgres-step-keys.js'
import * as postgresStepRows from './2026-12-02T200000-postgres-step-rows.js'
import * as postgresPlainTables from './2026-12-05T000000-postgres-plain-tables.js'
import * as postgresBaseline from './2026-12-05T000000-postgres-baseline.js'

/**
 * Every migration, by name. Listed in code rather than scanned from a folder so the store
 * migrates the same way from `src` (tests), `dist` (the CLI) or a bundle. Names sort in the
 * order they must run; append new ones, never edit or rename an old one.
 */
export const migrations: Readonly<Record<string, Migration>> = {
  '2026-11-29T120000-initial': initial,
  '2026-11-29T150000-policy': policy,
  '2026-11-29T170000-durability': durability,
  '2026-11-29T200000-run-contracts': runContracts,
  '2026-11-29T210000-clustered-tables': clusteredTables,
  '2026-12-01T120000-compact-journal': compactJournal,
  '2026-12-01T130000-postgres-run-writer': postgresRunWriter,
  '2026-12-01T150000-postgres-commit-arguments': postgresCommitArguments,
  '2026-12-01T160000-run-log': runLog,
  '2026-12-01T170000-postgres-step-commit': postgresStepCommit,
  '2026-12-02T010000-postgres-deferred-head': postgresDeferredHead,
  '2026-12-02T080000-run-usage': runUsage,
  '2026-12-02T090000-awaiting-input': awaitingInput,
  '2026-12-02T110000-run-forks': runForks,
  '2026-12-02T160000-postgres-step-keys': postgresStepKeys,
  '2026-12-02T200000-postgres-step-rows': postgresStepRows,
  '2026-12-05T000000-postgres-plain-tables': postgresPlainTables
}

/** What a new PostgreSQL store runs instead of the chain: the same schema, in one migration (names.ts). */
export const postgresBaselineMigrations: Readonly<Record<string, Migration>> = {
  '2026-12-05T000000-postgres-baseline': postgresBaseline
}

/** The `MigrationProvider` a Kysely `Migrator` reads `migrations` (the chain) through: SQLite's, and an older PostgreSQL store's. */
export const migrationProvider: MigrationProvider = {
  getMigrations: async () => ({ ...migrations })
}

/**
 * The provider `openStore` migrates a PostgreSQL store with: the chain for a store that has run
 * any of it (it walks the rest, 2026-12-05T000000-postgres-plain-tables among them), the baseline
 * for a new one. Kysely's migrator asks after taking its lock and creating its `kysely_migration`
 * table, so a store that another opener is migrating is seen as that opener left it.
 */
export const postgresMigrationProvider = (db: Kysely<any>): MigrationProvider => ({
  getMigrations: async () => {
    const chain = await sql<{ n: number }>`select count(*)::int as n from kysely_migration where name in (${sql.join(Object.keys(migrations))})`.execute(db)
    return Number(chain.rows[0]?.n) > 0 ? { ...migrations } : { ...postgresBaselineMigrations }
  }
})
