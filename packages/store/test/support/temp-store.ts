import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { Kysely, Migrator, PostgresDialect, SqliteDialect } from 'kysely'
import pg from 'pg'
import { inject, onTestFinished } from 'vitest'
import {
  type JournalTransition,
  migrationProvider,
  openStore,
  type NewAttempt,
  type NewRun,
  type NewStep,
  type NewTransition,
  type Store
} from '@agentvisor/store'

/** Every dialect the store supports: each repository test runs on each (docs/development.md, "Tests"). */
export const DIALECTS = ['sqlite', 'postgres'] as const
export type TestDialect = (typeof DIALECTS)[number]

/** A fresh folder for this test, removed when it finishes. */
export function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'agentvisor-store-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }))
  return dir
}

/**
 * Where a fresh store for this test lives, removed when the test finishes: a SQLite file in a
 * fresh folder, or a fresh database on the test run's PostgreSQL (test/setup/postgres.ts).
 * `migrated` gives a PostgreSQL database that already has the schema (copied from a template
 * migrated once per test file, which is much faster than migrating each); a SQLite file is
 * always new and empty.
 */
export async function tempLocation(dialect: TestDialect, options: { readonly migrated?: boolean } = {}): Promise<string> {
  const fresh = await freshLocation(dialect, options.migrated ?? false)
  onTestFinished(fresh.remove)
  return fresh.location
}

/**
 * A store on a real SQLite file, or a real PostgreSQL database, closed then deleted when the test
 * finishes. `byChain`: made by the chain (`migrateByChain`), as a store of the releases before the
 * baselines, rather than by its dialect's baseline as `openStore` makes a new store.
 */
export async function tempStore(dialect: TestDialect = 'sqlite', options: { readonly byChain?: boolean } = {}): Promise<Store> {
  const byChain = options.byChain ?? false
  const fresh = await freshLocation(dialect, !byChain)
  let store: Store
  try {
    if (byChain) await migrateByChain(fresh.location)
    store = await openStore(fresh.location)
  } catch (error) {
    await fresh.remove()
    throw error
  }
  onTestFinished(async () => {
    await store.close()
    await fresh.remove()
  })
  return store
}

/**
 * Makes the fresh `location` a store as the releases before the baselines made it: every migration
 * of the chain (and those after it) applied one by one, as an older store was upgraded, where
 * `openStore` gives a new store its dialect's baseline (migrations/index.ts); with `to`, only the
 * chain up to that migration, as an older release left it. For the tests that walk the chain
 * back and forth, which only a store made by it can.
 */
export async function migrateByChain(location: string, options: { readonly to?: string } = {}): Promise<void> {
  const db = rawKysely(location)
  try {
    const migrator = new Migrator({ db, provider: migrationProvider })
    const { error } = await (options.to === undefined ? migrator.migrateToLatest() : migrator.migrateTo(options.to))
    if (error !== undefined) throw error
  } finally {
    await db.destroy()
  }
}

/** A Kysely of its own on `location` (a SQLite file or a PostgreSQL URL), without `openStore`, which would migrate it to the newest. */
export function rawKysely(location: string): Kysely<unknown> {
  if (location.startsWith('postgres'))
    return new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: location, max: 1 }) }) })
  const sqlite = new BetterSqlite3(location)
  // Migrations run with defensive mode off, as openStore runs them (2026-12-02T090000).
  sqlite.unsafeMode(true)
  return new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite }) })
}

/**
 * Makes `file` a SQLite store as the version before the newest migration left it: made by the
 * chain, then that migration undone (its record with it), so the next `openStore` has one
 * migration to apply.
 */
export async function olderSqliteStore(file: string): Promise<void> {
  await migrateByChain(file)
  const store = await openStore(file)
  // Migrations run with defensive mode off, as openStore runs them (2026-12-02T090000).
  store.sqlite?.unsafeMode(true)
  try {
    const { error } = await new Migrator({ db: store.db, provider: migrationProvider }).migrateDown()
    if (error !== undefined) throw error
  } finally {
    await store.close()
  }
}

interface FreshLocation {
  readonly location: string
  readonly remove: () => Promise<void>
}

async function freshLocation(dialect: TestDialect, migrated: boolean): Promise<FreshLocation> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(path.join(tmpdir(), 'agentvisor-store-'))
    return { location: path.join(dir, 'agentvisor.db'), remove: async () => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }) }
  }
  const name = migrated ? await takeSpare() : await createDatabase('template1')
  return {
    location: databaseUrl(name),
    // FORCE: a test that failed half-way may have left a store open on it. Not awaited: the next
    // test need not wait for it, and the whole cluster goes at the end of the run anyway.
    remove: async () =>
      void admin()
        .query(`drop database if exists "${name}" with (force)`)
        .catch(() => undefined)
  }
}

let spare: Promise<string> | undefined
/**
 * A database copied from the migrated template, and the next one's copy started at once, so
 * that a test mostly finds its database ready instead of waiting for CREATE DATABASE.
 */
async function takeSpare(): Promise<string> {
  const taken = spare ?? createDatabase(await migratedTemplate())
  spare = taken.then(async () => createDatabase(await migratedTemplate()))
  spare.catch(() => undefined) // a failure surfaces when that spare is taken
  return taken
}

let adminPool: pg.Pool | undefined
/** A superuser connection to the server, for creating and dropping the tests' databases. */
export const admin = (): pg.Pool => (adminPool ??= new pg.Pool({ connectionString: inject('pgUrl'), max: 2, allowExitOnIdle: true }))

/** The URL of database `name` on the test run's PostgreSQL, with its password. */
export function databaseUrl(name: string): string {
  const url = new URL(inject('pgUrl'))
  url.pathname = `/${name}`
  return url.toString()
}

let databases = 0
let strategy: Promise<string> | undefined
/** A new database on the test run's PostgreSQL, copied from `template`; returns its name. */
export async function createDatabase(template: string): Promise<string> {
  const name = `agentvisor_${process.pid}_${++databases}_${randomBytes(3).toString('hex')}`
  // PostgreSQL 15 copies a database through the WAL by default; FILE_COPY (what older versions
  // always do, and have no word for) copies the template's few files at once: ~30 ms, not ~150.
  strategy ??= admin()
    .query<{ server_version_num: string }>('show server_version_num')
    .then(({ rows }) => (Number(rows[0]?.server_version_num) >= 150000 ? ' strategy file_copy' : ''))
  await admin().query(`create database "${name}" template "${template}"${await strategy}`)
  return name
}

let template: Promise<string> | undefined
/** A database migrated once per test file, that per-test databases are copied from. */
export const migratedTemplate = (): Promise<string> =>
  (template ??= (async () => {
    const name = await createDatabase('template1')
    const store = await openStore(databaseUrl(name))
    await store.close()
    return name
  })())

/** A contract as agentvisor stores one: defaults applied, the workspace absolute (docs/task-file.md). */
export const CONTRACT = {
  goal: 'Write DONE into out.txt',
  workspace: '/tmp/agentvisor-test-ws',
  providers: [{ name: 'primary', kind: 'openai', model: 'gpt-4o-mini', apiKeyEnv: 'OPENAI_API_KEY' }],
  limits: { maxSteps: 10, maxRetries: 2, dispatchCeiling: 50, timeoutMs: 600_000 },
  policy: { layers: [] },
  approval: 'prompt',
  children: { maxChildren: 8, maxDepth: 1, maxConcurrent: 4 }
} as const

export const run = (overrides: Partial<NewRun> = {}): NewRun => ({
  id: 'run-1',
  parent_id: null,
  status: 'running',
  goal: 'Write DONE into out.txt',
  contract_json: JSON.stringify(CONTRACT),
  state: 'dispatching',
  created_at: '2026-11-29T12:00:00.000Z',
  updated_at: '2026-11-29T12:00:00.000Z',
  ...overrides
})

export const transition = (overrides: Partial<NewTransition> = {}): NewTransition => ({
  run_id: 'run-1',
  seq: 1,
  from_state: 'dispatching',
  event: 'PROVIDER_OK',
  to_state: 'acting',
  snapshot_json: '{"value":"acting"}',
  at: '2026-11-29T12:00:01.000Z',
  ...overrides
})

/** A transition as a commit carries it into its journal entry. */
export const journalTransition = (overrides: Partial<JournalTransition> = {}): JournalTransition => ({
  seq: 1,
  from: 'dispatching',
  event: { type: 'PROVIDER_OK' },
  to: 'acting',
  at: '2026-11-29T12:00:01.000Z',
  ...overrides
})

/** The snapshot a test commit carries (the store keeps it as it is). */
export const SNAPSHOT = '{"v":1,"snapshot":{"value":"acting"}}'

export const step = (overrides: Partial<NewStep> = {}): NewStep => ({
  run_id: 'run-1',
  step: 1,
  provider: 'primary',
  at: '2026-11-29T12:00:01.000Z',
  ...overrides
})

export const attempt = (overrides: Partial<NewAttempt> = {}): NewAttempt => ({
  run_id: 'run-1',
  step: 1,
  attempt: 0,
  provider: 'primary',
  reason: 'initial',
  started_at: '2026-11-29T12:00:00.500Z',
  ...overrides
})
