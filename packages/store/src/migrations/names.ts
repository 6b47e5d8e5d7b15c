/**
 * The name of every migration of the chain, in the order they run: exactly what the
 * `kysely_migration` table of an up-to-date SQLite store, or of a PostgreSQL store made before
 * 2026-12-05, holds. Kept apart from the migrations themselves (which import Kysely) so that a
 * reader can tell a current store without loading them; `index.ts` maps each name to its
 * migration and a test holds the lists equal.
 */
export const MIGRATION_NAMES: ReadonlyArray<string> = [
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

/**
 * What a PostgreSQL store made since 2026-12-05 records: the baseline, which makes the schema the
 * chain above ends with in one migration (a new store walks no history), then whatever comes after.
 */
export const POSTGRES_BASELINE_NAMES: ReadonlyArray<string> = ['2026-12-05T000000-postgres-baseline']

/**
 * Whether a store whose `kysely_migration` table lists `applied` (in any order) holds exactly
 * this version's migrations of the chain or of the PostgreSQL baseline: none missing, none newer.
 */
export const isCurrentSchema = (applied: ReadonlyArray<string>): boolean => {
  const sorted = [...applied].sort()
  return [MIGRATION_NAMES, POSTGRES_BASELINE_NAMES].some((names) => sorted.length === names.length && sorted.every((name, i) => name === names[i]))
}

/** Whether a name is one of this version's migrations, of either list. */
export const isKnownMigration = (name: string): boolean => MIGRATION_NAMES.includes(name) || POSTGRES_BASELINE_NAMES.includes(name)
