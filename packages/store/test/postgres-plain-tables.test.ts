import { type Kysely, Migrator } from 'kysely'
import { describe, expect, it } from 'vitest'
import { listAttempts, listJournalEntries, listSteps, listTransitions, migrationProvider, postgresRunWriter } from '@agentvisor/store'
import { SNAPSHOT, journalTransition, tempStore } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

/** The 48 arguments of the previous release's `agentvisor_commit` for step `n` of `run-1`: the answer settled, the step, the next receipt, the entry. */
const packedStep = (token: number, n: number): unknown[] => [
  'run-1',
  token,
  null,
  'dispatching',
  n,
  `u${n}`,
  null,
  null,
  ...[n, 0, 'ok', `settled ${n}`, null, null, null, 10 + n, null, 3, 4, null],
  ...[n, 'p', 'summary', `text ${n}`, '[]', '[]', null, 3, 4, `at ${n}`],
  ...[n + 1, 0, 'p', 'initial', null, null, null, null, null, null, null, null, `started ${n + 1}`],
  null,
  n,
  n,
  JSON.stringify([journalTransition({ seq: n })]),
  SNAPSHOT
]

describe('the plain-tables migration on PostgreSQL', () => {
  it("turns a store of the previous release's packed layout into plain tables, every row read back through the repositories as before", async () => {
    const store = await tempStore('postgres', { byChain: true })
    const db = store.db as unknown as Kysely<unknown>
    const pool = store.pool!
    const migrator = new Migrator({ db, provider: migrationProvider })
    // The previous release's schema: the chain up to its last migration.
    expect((await migrator.migrateTo('2026-12-02T200000-postgres-step-rows')).error).toBeUndefined()
    await pool.query(
      `insert into runs (id, status, goal, state, steps, created_at, updated_at, lease_owner, lease_expires_at, lease_token)
       values ('run-1', 'running', 'g', 'dispatching', 0, 't', 't', 'me', 5000, 1)`
    )
    await pool.query(`insert into run_contracts (run_id, contract_json) values ('run-1', '{}')`)
    await pool.query(`insert into attempts (run_id, step, attempt, provider, reason, started_at) values ('run-1', 1, 0, 'p', 'initial', 'started 1')`)
    const call = `SELECT agentvisor_commit(${Array.from({ length: 48 }, (_, i) => `$${i + 1}`).join(', ')})`
    for (const n of [1, 2]) await pool.query(call, packedStep(1, n))
    // Written as the previous release wrote them: carried by the step rows.
    expect((await pool.query('select count(*)::int as n from step_rows where next_step is not null and entry_seq is not null')).rows).toEqual([{ n: 2 }])
    const before = {
      attempts: await runCall(listAttempts(store.db, 'run-1')),
      steps: await runCall(listSteps(store.db, 'run-1')),
      entries: await runCall(listJournalEntries(store.db, 'run-1')),
      transitions: await runCall(listTransitions(store.db, 'run-1'))
    }
    expect(before.attempts.map((a) => [a.step, a.outcome])).toEqual([
      [1, 'ok'],
      [2, 'ok'],
      [3, 'pending']
    ])

    expect((await migrator.migrateToLatest()).error).toBeUndefined()
    expect(
      (await pool.query("select relname, relkind from pg_class where relname in ('attempts', 'steps', 'journal_entries', 'step_rows') order by relname")).rows
    ).toEqual([
      { relname: 'attempts', relkind: 'r' },
      { relname: 'journal_entries', relkind: 'r' },
      { relname: 'steps', relkind: 'r' }
    ])
    expect((await pool.query("select count(*)::int as n from pg_trigger where tgname like '%_write'")).rows).toEqual([{ n: 0 }])
    // Every row reads back as it read before.
    expect(await runCall(listAttempts(store.db, 'run-1'))).toEqual(before.attempts)
    expect(await runCall(listSteps(store.db, 'run-1'))).toEqual(before.steps)
    expect(await runCall(listJournalEntries(store.db, 'run-1'))).toEqual(before.entries)
    expect(await runCall(listTransitions(store.db, 'run-1'))).toEqual(before.transitions)

    // And the run goes on: step 3 committed by this release's writer, the pending receipt settled.
    const writer = postgresRunWriter(pool)
    await runCall(
      writer.commit({
        runId: 'run-1',
        leaseToken: 1,
        head: { state: 'dispatching', steps: 3, updated_at: 'u3', error_json: null, ended_at: null },
        writes: [
          { op: 'settleAttempt', runId: 'run-1', step: 3, attempt: 0, patch: { outcome: 'ok', settled_at: 'settled 3' } },
          { op: 'insertStep', row: { run_id: 'run-1', step: 3, provider: 'p', at: 'at 3' } }
        ],
        transitions: [journalTransition({ seq: 3 })],
        snapshot: SNAPSHOT
      })
    )
    expect((await runCall(listAttempts(store.db, 'run-1'))).map((a) => [a.step, a.outcome])).toEqual([
      [1, 'ok'],
      [2, 'ok'],
      [3, 'ok']
    ])
    expect((await runCall(listSteps(store.db, 'run-1'))).map((s) => s.step)).toEqual([1, 2, 3])
    expect((await runCall(listTransitions(store.db, 'run-1'))).map((t) => t.seq)).toEqual([1, 2, 3])
  })
})
