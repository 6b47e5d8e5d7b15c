import type { StoreDialect } from '../dialect.js'

/**
 * How a store's schema comes about (docs/deploy.md, "Migrations"):
 *
 * - A new store runs its dialect's baseline (`BASELINE_NAMES`), which makes in one migration the
 *   schema the chain ends with, then every later migration (`LATER_NAMES`).
 * - A store made before the baselines walks the rest of the chain (`CHAIN_NAMES`), then the same
 *   later migrations.
 *
 * Kept apart from the migrations themselves (which import Kysely) so that a reader can tell a
 * current store without loading them; `index.ts` maps each name to its migration and a test holds
 * the lists equal.
 */

/** The chain, frozen: every migration a store made before 2026-12-05 may still have to walk, in the order they run. */
export const CHAIN_NAMES: ReadonlyArray<string> = [
  '2026-11-29T120000-initial',
  '2026-11-29T150000-policy',
  '2026-11-29T170000-durability',
  '2026-11-29T200000-run-contracts',
  '2026-11-29T210000-clustered-tables',
  '2026-12-01T120000-compact-journal',
  '2026-12-01T130000-postgres-run-writer',
  '2026-12-01T150000-postgres-commit-arguments',
  '2026-12-01T160000-run-log',
  '2026-12-01T170000-postgres-step-commit',
  '2026-12-02T010000-postgres-deferred-head',
  '2026-12-02T080000-run-usage',
  '2026-12-02T090000-awaiting-input',
  '2026-12-02T110000-run-forks',
  '2026-12-02T160000-postgres-step-keys',
  '2026-12-02T200000-postgres-step-rows',
  '2026-12-05T000000-postgres-plain-tables'
]

/** What a new store runs instead of the chain: its dialect's whole schema as the chain leaves it, in one migration. */
export const BASELINE_NAMES: Readonly<Record<StoreDialect, ReadonlyArray<string>>> = {
  sqlite: ['2026-12-05T000000-sqlite-baseline'],
  postgres: ['2026-12-05T000000-postgres-baseline']
}

/** Migrations added after the baselines, in the order they run: every store runs them, however it began. */
export const LATER_NAMES: ReadonlyArray<string> = []

/** What the `kysely_migration` table of a current store of `dialect` made new holds, in order: its baseline and the later migrations. */
export const newStoreNames = (dialect: StoreDialect): ReadonlyArray<string> => [...BASELINE_NAMES[dialect], ...LATER_NAMES]

/** What the `kysely_migration` table of a current store made before the baselines holds, in order: the chain and the later migrations. */
export const UPGRADED_STORE_NAMES: ReadonlyArray<string> = [...CHAIN_NAMES, ...LATER_NAMES]

/** Whether a store of `dialect` whose `kysely_migration` table lists `applied` (in any order) holds exactly this version's migrations: none missing, none newer. */
export const isCurrentSchema = (applied: ReadonlyArray<string>, dialect: StoreDialect): boolean => {
  const sorted = [...applied].sort()
  return [newStoreNames(dialect), UPGRADED_STORE_NAMES].some((names) => sorted.length === names.length && sorted.every((name, i) => name === names[i]))
}

/** Whether a name is one of this version's migrations. */
export const isKnownMigration = (name: string): boolean =>
  CHAIN_NAMES.includes(name) || LATER_NAMES.includes(name) || Object.values(BASELINE_NAMES).some((names) => names.includes(name))
