import BetterSqlite3 from 'better-sqlite3'
import { CHAIN_NAMES } from '../../packages/store/src/migrations/names.js'

/**
 * Makes a current SQLite store at `file` look as the previous release (commit 1ccb085) left it:
 * its `kysely_migration` records the chain up to the release's last migration, so the next open
 * walks the rest of the chain. Its tables stay: the chain's last migration changes nothing on
 * SQLite, and a new store's baseline is the chain's schema (packages/store/test/baseline.test.ts).
 */
export function asPreviousRelease(file: string): void {
  const raw = new BetterSqlite3(file)
  try {
    raw.transaction(() => {
      raw.prepare('DELETE FROM kysely_migration').run()
      const record = raw.prepare('INSERT INTO kysely_migration (name, timestamp) VALUES (?, ?)')
      for (const name of CHAIN_NAMES.slice(0, -1)) record.run(name, '2026-12-04T00:00:00.000Z')
    })()
  } finally {
    raw.close()
  }
}
