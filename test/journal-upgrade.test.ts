import { mkdirSync, readFileSync, rmSync } from 'node:fs'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { Either } from 'effect'
import { afterEach, describe, expect, it } from 'vitest'
import { loadRunSnapshots } from '@agentvisor/actors'
import { listJournalEntries, openStore } from '@agentvisor/store'
import { lastJson, runCli, tempDir } from './support/cli.js'
import { runCall } from './support/run-call.js'

// The fixture is a store written by agentvisor before the compact journal: one row per
// transition, each with its snapshot (how it was made: the fixture's first lines).
const FIXTURE = new URL('./fixtures/pre-journal-store.sql', import.meta.url)
const PAUSED = '51e2fa39-37e5-4a03-8789-a05e8f695901'
const FINISHED = 'ecdfe9b7-4a66-4318-adb3-1289960f3aa5'

interface Trace {
  run: { id: string; status: string }
  transitions: Array<{ seq: number; from: string; event: string; to: string; at: string }>
}

const PAUSED_TRANSITIONS = [
  { seq: 1, from: 'dispatching', event: 'PROVIDER_OK', to: 'acting', at: '2026-12-01T11:56:07.227Z' },
  { seq: 2, from: 'acting', event: 'TOOLS_DONE', to: 'verifying', at: '2026-12-01T11:56:07.255Z' },
  { seq: 3, from: 'verifying', event: 'VERIFY_FAILED', to: 'dispatching', at: '2026-12-01T11:56:07.276Z' },
  { seq: 4, from: 'dispatching', event: 'PROVIDER_OK', to: 'acting', at: '2026-12-01T11:56:07.283Z' },
  { seq: 5, from: 'acting', event: 'APPROVAL_REQUESTED', to: 'awaitingApproval', at: '2026-12-01T11:56:07.285Z' }
]

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** The old store as a file, its runs' workspaces in a fresh folder. */
const oldStore = () => {
  const dir = tempDir()
  dirs.push(dir)
  const ws = path.join(dir, 'ws')
  mkdirSync(ws)
  mkdirSync(path.join(dir, 'ws2'))
  const inJson = (p: string) => JSON.stringify(p).slice(1, -1)
  const dump = readFileSync(FIXTURE, 'utf8')
    .replaceAll('@WORKSPACE2@', inJson(path.join(dir, 'ws2')))
    .replaceAll('@WORKSPACE@', inJson(ws))
  const db = path.join(dir, 'av.db')
  const raw = new BetterSqlite3(db)
  try {
    raw.exec(dump)
    // A run's timeout counts from its creation (docs/task-file.md): the paused run is made a
    // moment old, or it would have timed out by the time anyone resumes it.
    raw.prepare('UPDATE runs SET created_at = ? WHERE id = ?').run(new Date().toISOString(), PAUSED)
  } finally {
    raw.close()
  }
  return { db, ws }
}

const show = async (db: string, runId: string): Promise<Trace> => {
  const shown = await runCli(['show', runId, '--json', '--db', db])
  expect(shown.code, shown.stderr).toBe(0)
  return lastJson<Trace>(shown)
}

describe('a store written before the compact journal (docs/durability.md, "The journal")', () => {
  it('opens, shows its runs as they were, and resumes a paused one onto the new journal', async () => {
    const { db, ws } = oldStore()

    expect((await show(db, PAUSED)).transitions).toEqual(PAUSED_TRANSITIONS)
    const finished = await show(db, FINISHED)
    expect(finished.run.status).toBe('succeeded')
    expect(finished.transitions.map((t) => `${t.seq}:${t.to}`)).toEqual([
      '1:acting',
      '2:verifying',
      '3:dispatching',
      '4:acting',
      '5:verifying',
      '6:finished.succeeded'
    ])

    const approved = await runCli(['approve', PAUSED, '--db', db])
    expect(approved.code, approved.stderr).toBe(0)
    const resumed = await runCli(['resume', PAUSED, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toMatchObject({ runId: PAUSED, status: 'succeeded', steps: 2 })
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE')

    const after = await show(db, PAUSED)
    expect(after.transitions.slice(0, 5)).toEqual(PAUSED_TRANSITIONS)
    expect(after.transitions.map((t) => t.seq)).toEqual(after.transitions.map((_, i) => i + 1))
    expect(after.transitions.slice(5).map((t) => `${t.from}>${t.to}`)).toEqual(['awaitingApproval>acting', 'acting>verifying', 'verifying>finished.succeeded'])

    const store = await openStore(db)
    try {
      const entries = await runCall(listJournalEntries(store.db, PAUSED))
      // The old transitions are an entry each; the resumed drive committed its pure ones together.
      expect(entries.map((e) => [e.first_seq, e.seq])).toEqual([
        [1, 1],
        [2, 2],
        [3, 3],
        [4, 4],
        [5, 5],
        [6, 6],
        [7, 8]
      ])
      // Time travel reaches every transition, old (their own snapshots) and new (replayed).
      const snapshots = (await runCall(loadRunSnapshots(store.db, PAUSED)))!.map((s) => Either.getOrThrow(s.snapshot))
      expect(snapshots.map((s) => s.value)).toEqual([
        'acting',
        'verifying',
        'dispatching',
        'acting',
        'awaitingApproval',
        'acting',
        'verifying',
        { finished: 'succeeded' }
      ])
      expect(snapshots[2]).toMatchObject({ context: { step: 2, completedSteps: 1, dispatches: 1 } })
      expect(snapshots[6]).toMatchObject({ context: { step: 2, completedSteps: 2, dispatches: 2, ended: false } })
    } finally {
      await store.close()
    }
  })

  it('refuses to resume a run whose snapshot has a schema version it does not read, in one line naming the run', async () => {
    const { db } = oldStore()
    // Migrated by the first command that opens it, then given what a newer agentvisor would write.
    expect((await runCli(['approve', PAUSED, '--db', db])).code).toBe(0)
    const raw = new BetterSqlite3(db)
    try {
      raw.prepare(`UPDATE journal_entries SET snapshot_json = '{"v":7,"snapshot":{}}' WHERE run_id = ? AND seq = 5`).run(PAUSED)
    } finally {
      raw.close()
    }
    const resumed = await runCli(['resume', PAUSED, '--db', db])
    expect(resumed.code).toBe(2)
    expect(resumed.stderr.trim().split('\n')).toEqual([
      `agentvisor: run ${PAUSED} cannot be resumed: its last snapshot has schema version 7, which this agentvisor does not read (it reads versions 1 and 2): it was written by another version of agentvisor`
    ])
    expect((await show(db, PAUSED)).transitions).toEqual(PAUSED_TRANSITIONS)
  })
})
