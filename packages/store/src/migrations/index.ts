import type { Migration, MigrationProvider } from 'kysely'
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
import * as sqliteBaseline from './2026-12-05T000000-sqlite-baseline.js'
import type { StoreDialect } from '../dialect.js'

/**
 * The chain, by name: every migration a store made before the baselines walks, frozen (names.ts
 * `CHAIN_NAMES`). Listed in code rather than scanned from a folder so the store migrates the same
 * way from `src` (tests), `dist` (the CLI) or a bundle. Names sort in the order they must run;
 * never edit, rename or append to it: a new migration goes to `laterMigrations`.
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

/**
 * What a new store runs instead of the chain, by dialect: the schema the chain ends with, in one
 * migration each (names.ts `BASELINE_NAMES`; a test holds each equal to the chain's end).
 */
export const baselineMigrations: Readonly<Record<StoreDialect, Readonly<Record<string, Migration>>>> = {
  sqlite: { '2026-12-05T000000-sqlite-baseline': sqliteBaseline },
  postgres: { '2026-12-05T000000-postgres-baseline': postgresBaseline }
}

/**
 * Migrations added after the baselines (names.ts `LATER_NAMES`): every store runs them, a new one
 * after its baseline, an older one after the chain. Append new migrations here, never to the
 * chain or a baseline (docs/deploy.md, "Migrations").
 */
export const laterMigrations: Readonly<Record<string, Migration>> = {}

/** The `MigrationProvider` a Kysely `Migrator` reads the chain (and the later migrations) through: to upgrade a store made before the baselines. */
export const migrationProvider: MigrationProvider = {
  getMigrations: async () => ({ ...migrations, ...laterMigrations })
}

/**
 * The provider `openStore` migrates a store with: the chain for a store that has run any of it
 * (it walks the rest), its dialect's baseline for a new one; the later migrations after either.
 * `appliedChain` counts the chain's names in `kysely_migration`, on the connection the migrator
 * runs on (SQLite's one, whose Kysely connection the migrator holds meanwhile) or any (PostgreSQL's
 * pool). Kysely's migrator asks after creating its `kysely_migration` table and taking its lock, so
 * a store that another opener is migrating is seen as that opener left it.
 */
export const storeMigrationProvider = (dialect: StoreDialect, appliedChain: (names: ReadonlyArray<string>) => Promise<number>): MigrationProvider => ({
  getMigrations: async () => ({ ...((await appliedChain(Object.keys(migrations))) > 0 ? migrations : baselineMigrations[dialect]), ...laterMigrations })
})
