import { closeSync, openSync, readSync, statSync } from 'node:fs'
import BetterSqlite3 from 'better-sqlite3'
import { Effect } from 'effect'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { insertRun, listAttempts, listSteps, listToolEffects, sqliteRunWriter, type TransitionCommit } from '@agentvisor/store'
import { SNAPSHOT, attempt, journalTransition, run, step, tempStore } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

// docs/durability.md, "How a run is stored": on SQLite a run's receipts, steps, journal entries
// and tool effects are the rows of one clustered table, `run_log`, read and written under the
// old names through views.

/** Step `i`'s commit as the driver makes it: receipt i settled, step i with feedback, its entry, receipt i + 1, the head. */
const stepCommit = (i: number): TransitionCommit => ({
  runId: 'run-1',
  leaseToken: 1,
  writes: [
    {
      op: 'settleAttempt',
      runId: 'run-1',
      step: i,
      attempt: 0,
      patch: { outcome: 'ok', latency_ms: 3, tokens_in: 10, tokens_out: 2, settled_at: '2026-11-29T12:00:01.000Z' }
    },
    { op: 'insertStep', row: step({ step: i, text: 'done' }) },
    { op: 'setStepFeedback', runId: 'run-1', step: i, feedback: 'out.txt does not contain DONE' },
    { op: 'insertAttempt', row: attempt({ step: i + 1 }) }
  ],
  transitions: [journalTransition({ seq: 2 * i }), journalTransition({ seq: 2 * i + 1, from: 'verifying', to: 'dispatching' })],
  snapshot: SNAPSHOT,
  head: { state: 'dispatching', steps: i, updated_at: '2026-11-29T12:00:01.000Z', error_json: null, ended_at: null }
})

/** The page numbers of the WAL frames between byte offsets `from` and `to` of `file`'s -wal. */
const walPages = (file: string, from: number, to: number): number[] => {
  const fd = openSync(`${file}-wal`, 'r')
  try {
    const header = Buffer.alloc(32)
    readSync(fd, header, 0, 32, 0)
    const frame = 24 + header.readUInt32BE(8)
    const pages: number[] = []
    const page = Buffer.alloc(4)
    for (let at = from; at + frame <= to; at += frame) {
      readSync(fd, page, 0, 4, at)
      pages.push(page.readUInt32BE(0))
    }
    return pages
  } finally {
    closeSync(fd)
  }
}

describe('the run log on SQLite', () => {
  it("writes a step's receipts, step row and journal entry to the end of one table, beside the run's row", async () => {
    const store = await tempStore('sqlite')
    const file = store.sqlite!.name
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    await runCall(writer.createRun(run(), { owner: 'me', expiresAt: 5000 }))
    await runCall(writer.commit({ ...stepCommit(0), writes: [{ op: 'insertAttempt', row: attempt({ step: 1 }) }] }))
    // A reader holding its snapshot keeps the -wal from being restarted by the checkpointer, so
    // that each commit's frames are appended after the last.
    const reader = new BetterSqlite3(file, { readonly: true })
    reader.exec('BEGIN')
    reader.prepare('SELECT count(*) FROM runs').get()
    try {
      const touched: string[][] = []
      for (let i = 1; i <= 40; i++) {
        const before = statSync(`${file}-wal`).size
        await runCall(writer.commit(stepCommit(i)))
        touched.push(walPages(file, before, statSync(`${file}-wal`).size).map(String))
      }
      const owners = new Map(
        (store.sqlite!.prepare('SELECT pageno, name FROM dbstat').all() as Array<{ pageno: number; name: string }>).map((p) => [String(p.pageno), p.name])
      )
      // Page 1 is the file's header too, rewritten whenever the file grows by a page.
      const trees = touched.map((pages) => [...new Set(pages.filter((p) => p !== '1').map((p) => owners.get(p)))].sort())
      // Every commit dirtied the run's row and its log (the table's last page, the key's leaf where
      // the run's range ends), nothing else; most of them one page of each (the others started a
      // new page, which its parent gets to know).
      expect(new Set(trees.map((t) => t.join(' ')))).toEqual(new Set(['run_log run_log_key runs']))
      expect(touched.filter((pages) => pages.length === 3).length).toBeGreaterThan(touched.length / 2)
    } finally {
      reader.close()
      await runCall(writer.close())
    }
    expect((await runCall(listSteps(store.db, 'run-1'))).map((s) => [s.step, s.feedback])).toEqual(
      Array.from({ length: 40 }, (_, k) => [k + 1, 'out.txt does not contain DONE'])
    )
    expect((await runCall(listAttempts(store.db, 'run-1'))).map((a) => [a.step, a.outcome])).toEqual([
      ...Array.from({ length: 40 }, (_, k) => [k + 1, 'ok']),
      [41, 'pending']
    ])
    // The last entry is the last `j` of the run's range, the one resume restores.
    expect(Effect.runSync(writer.loadRun('run-1'))).toMatchObject({ last: { seq: 81, snapshot_json: SNAPSHOT } })
  })

  it('keeps an entry written through its view after every earlier one, whatever the run row says', async () => {
    const store = await tempStore('sqlite')
    await runCall(insertRun(store.db, run({ steps: 5 })))
    await sql`insert into journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json) values ('run-1', 1, 1, '[]', 'a')`.execute(store.db)
    await store.db.updateTable('runs').set({ steps: 0 }).where('id', '=', 'run-1').execute()
    await sql`insert into journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json) values ('run-1', 2, 2, '[]', 'b')`.execute(store.db)
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    try {
      expect(Effect.runSync(writer.loadRun('run-1'))).toMatchObject({ last: { seq: 2, snapshot_json: 'b' } })
      // And a seq is a run's once, at any step.
      await expect(
        sql`insert into journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json) values ('run-1', 2, 2, '[]', 'c')`.execute(store.db)
      ).rejects.toThrow(/UNIQUE constraint failed: journal_entries.run_id, journal_entries.seq/)
    } finally {
      await runCall(writer.close())
    }
  })

  it('deletes every row of a run with the run', async () => {
    const store = await tempStore('sqlite')
    const writer = sqliteRunWriter(store.db, store.sqlite!)
    await runCall(writer.createRun(run(), { owner: 'me', expiresAt: 5000 }))
    await runCall(writer.createRun(run({ id: 'run-2' }), { owner: 'me', expiresAt: 5000 }))
    await runCall(writer.commit(stepCommit(0)))
    await runCall(
      writer.write('run-1', 1, [
        { op: 'startToolEffect', row: { run_id: 'run-1', step: 1, position: 0, tool_call_id: 'c1', name: 'write_file', arguments: '{}', started_at: 't' } }
      ])
    )
    await runCall(writer.commit({ ...stepCommit(0), runId: 'run-2', writes: [{ op: 'insertAttempt', row: attempt({ run_id: 'run-2' }) }] }))
    await runCall(writer.close())
    await store.db.deleteFrom('runs').where('id', '=', 'run-1').execute()
    const left = store.sqlite!.prepare('SELECT DISTINCT run_id FROM run_log').pluck().all()
    expect(left).toEqual(['run-2'])
    expect(await runCall(listToolEffects(store.db, 'run-1'))).toEqual([])
  })
})
