import * as path from 'node:path'
import { kyselyRunWriter, listSteps, openStore, sqliteRunWriter, StoreError } from '@agentvisor/store'
import BetterSqlite3 from 'better-sqlite3'
import { Effect } from 'effect'
import { afterEach, describe, expect, it } from 'vitest'
import { type Inspector, startInspector } from '../packages/cli/src/inspector/server.js'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'
import { inspectorFetch } from './support/inspector.js'
import { runCall } from './support/run-call.js'

/** A real run through the built CLI: one step that writes out.txt, then one that says it is done. */
const realRun = async (dir: string, db: string): Promise<string> => {
  const task = writeTask(dir, {
    goal: 'Write DONE into out.txt',
    workspace: 'ws',
    providers: [
      { name: 'script', kind: 'scripted', steps: [{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }, { text: 'done' }] }
    ],
    approval: 'auto'
  })
  const result = await runCli(['run', task, '--json', '--db', db])
  expect(result.code, result.stderr).toBe(0)
  return lastJson<{ runId: string }>(result).runId
}

/** What a disk error, a bad restore or a hand edit may leave: step 1's results, well-formed JSON of the wrong shape. */
const corruptResults = (db: string, runId: string): void => {
  const sqlite = new BetterSqlite3(db)
  try {
    // Counted by RETURNING: `steps` is a view, whose writes SQLite does not count as changes.
    const changed = sqlite
      .prepare('UPDATE steps SET results_json = ? WHERE run_id = ? AND step = 1 RETURNING step')
      .all(JSON.stringify([{ toolCallId: 'c1', name: 'write_file', ok: 'yes', output: 'wrote out.txt' }]), runId)
    expect(changed).toHaveLength(1)
  } finally {
    sqlite.close()
  }
}

const messageOf = (runId: string) => `run ${runId} has a corrupt steps.results_json (step 1): [0].ok: Expected boolean, actual "yes"`

let inspector: Inspector | undefined
afterEach(async () => {
  await inspector?.close()
  inspector = undefined
})

describe('a stored row whose JSON does not decode (docs/durability.md, "Corrupt rows")', () => {
  it('is a StoreError naming the run and the column from every store read, never a row cast into shape', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await realRun(dir, db)
    corruptResults(db, runId)

    const store = await openStore(db)
    try {
      const expected = { _tag: 'StoreError', runId, column: 'steps.results_json', message: messageOf(runId) }
      await expect(runCall(listSteps(store.db, runId))).rejects.toMatchObject(expected)
      await expect(runCall(kyselyRunWriter(store.db).loadRun(runId))).rejects.toMatchObject(expected)
      // The prepared-statement writer reads synchronously: it fails with the same error at once.
      const writer = sqliteRunWriter(store.db, store.sqlite!)
      const thrown = Effect.runSync(Effect.flip(writer.loadRun(runId)))
      expect(thrown).toBeInstanceOf(StoreError)
      expect(thrown).toMatchObject(expected)
      await runCall(writer.close())
    } finally {
      await store.close()
    }
  })

  it('makes show and resume print that one line and exit 2, while runs still lists the run', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await realRun(dir, db)
    corruptResults(db, runId)
    const line = `agentvisor: ${messageOf(runId)}`

    const show = await runCli(['show', runId, '--db', db])
    expect({ code: show.code, stderr: show.stderr, stdout: show.stdout }).toEqual({ code: 2, stderr: `${line}\n`, stdout: '' })
    const showJson = await runCli(['show', runId, '--json', '--db', db])
    expect(showJson.code).toBe(2)
    expect(lastJson(showJson)).toEqual({ error: { kind: 'input', message: messageOf(runId) } })

    const resume = await runCli(['resume', runId, '--db', db])
    expect(resume.code).toBe(2)
    expect(resume.stderr.trim().split('\n').at(-1)).toBe(line)
    expect(resume.stderr).not.toMatch(/\n\s+at /)

    const runs = await runCli(['runs', '--json', '--db', db])
    expect(runs.code).toBe(0)
    expect(lastJson<Array<{ id: string; status: string }>>(runs)).toEqual([expect.objectContaining({ id: runId, status: 'succeeded' })])
  })

  it('is answered by the inspector as that error for the run, which goes on serving the list', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await realRun(dir, db)
    corruptResults(db, runId)

    inspector = await startInspector({ db, port: 0 })
    const view = await inspectorFetch(inspector, `/api/runs/${runId}`)
    expect(view.status).toBe(500)
    expect(await view.json()).toEqual({ error: messageOf(runId) })
    const list = await inspectorFetch(inspector, '/api/runs')
    expect(list.status).toBe(200)
    expect(((await list.json()) as Array<{ id: string }>).map((r) => r.id)).toEqual([runId])
  })
})
