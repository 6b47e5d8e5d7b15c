import { readdirSync } from 'node:fs'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { lastJson, mockTask, runCli, tempDir, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()
const writeDone = { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE\n' } }] }

/** A store in a folder of its own with one succeeded run, its writer closed (no -wal, no -shm). */
const storeWithARun = async () => {
  const llm = await startMock([writeDone])
  const dir = tempDir()
  const db = path.join(dir, 'store', 'av.db')
  const ran = await runCli(['run', writeTask(dir, mockTask(llm.url, { workspace: path.join(dir, 'ws') })), '--json', '--db', db])
  expect(ran.code, ran.stderr).toBe(0)
  return { db, folder: path.dirname(db), runId: lastJson<{ runId: string }>(ran).runId }
}

describe('the read commands (docs/cli.md, "Read-only stores")', () => {
  it('leave a cleanly closed store folder as they found it: no -wal or -shm, and their output is right', async () => {
    const { db, folder, runId } = await storeWithARun()
    expect(readdirSync(folder)).toEqual(['av.db'])

    const runs = await runCli(['runs', '--json', '--db', db])
    expect(runs.code, runs.stderr).toBe(0)
    expect(lastJson<Array<{ id: string; status: string }>>(runs).map(({ id, status }) => ({ id, status }))).toEqual([{ id: runId, status: 'succeeded' }])
    expect(readdirSync(folder)).toEqual(['av.db'])

    const show = await runCli(['show', runId, '--json', '--db', db])
    expect(show.code, show.stderr).toBe(0)
    expect(lastJson<{ run: { id: string; status: string } }>(show).run).toMatchObject({ id: runId, status: 'succeeded' })
    expect(readdirSync(folder)).toEqual(['av.db'])

    const watch = await runCli(['watch', runId, '--json', '--db', db])
    expect(watch.code, watch.stderr).toBe(0)
    expect(lastJson<{ kind: string; status: string }>(watch)).toMatchObject({ kind: 'done', status: 'succeeded' })
    expect(readdirSync(folder)).toEqual(['av.db'])

    const replay = await runCli(['replay', runId, '--json', '--db', db])
    expect(replay.code, replay.stderr).toBe(0)
    expect(readdirSync(folder)).toEqual(['av.db'])
  })

  it('read what a live writer beside them has committed, and never create a store where there is none', async () => {
    const { db, runId } = await storeWithARun()
    const writer = new BetterSqlite3(db)
    try {
      writer.pragma('journal_mode = WAL')
      // Committed into the WAL, which the writer keeps open: a reader must look there.
      writer.prepare('UPDATE runs SET goal = ? WHERE id = ?').run('Changed by the live writer', runId)
      const show = await runCli(['show', runId, '--json', '--db', db])
      expect(show.code, show.stderr).toBe(0)
      expect(lastJson<{ run: { goal: string } }>(show).run.goal).toBe('Changed by the live writer')
    } finally {
      writer.close()
    }
    const missing = path.join(tempDir(), 'nothing', 'av.db')
    for (const args of [['runs'], ['show', runId], ['watch', runId], ['replay', runId]]) {
      const result = await runCli([...args, '--db', missing])
      expect(result.code, args[0]).toBe(2)
      expect(result.stderr.trim(), args[0]).toBe(`agentvisor: no store at ${missing}: nothing has run with it yet (check --db, or $AGENTVISOR_DB)`)
    }
    expect(readdirSync(path.dirname(path.dirname(missing)))).toEqual([])
  })
})
