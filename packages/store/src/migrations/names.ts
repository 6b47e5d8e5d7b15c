/**
 * The name of every migration, in the order they run: exactly what the `kysely_migration` table
 * of an up-to-date store holds. Kept apart from the migrations themselves (which import Kysely)
 * so that a reader can tell a current store without loading them; `index.ts` maps each name to
 * its migration and a test holds the two lists equal.
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
  '2026-12-02T200000-postgres-step-rows'
]

/**
 * Whether a store whose `kysely_migration` table lists `applied` (in any order) holds exactly
 * this version's migrations: none missing, none newer.
 */
export const isCurrentSchema = (applied: ReadonlyArray<string>): boolean => {
  const sorted = [...applied].sort()
  return sorted.length === MIGRATION_NAMES.length && sorted.every((name, i) => name === MIGRATION_NAMES[i])
}
