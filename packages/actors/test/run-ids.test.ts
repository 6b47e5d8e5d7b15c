import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Agentvisor } from '@agentvisor/actors'
import { getRun, listRuns, openStore } from '@agentvisor/store'
import { runCall } from '../../../test/support/run-call.js'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const timeOf = (id: string): number => Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16)

describe('the ids agentvisor makes for runs', () => {
  it('are version-7 UUIDs carrying when the run was made, for a run and a fork; a spawn_child child keeps the id its call derives (docs/durability.md, "Run ids")', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'av-run-ids-'))
    dirs.push(dir)
    const db = path.join(dir, 'av.db')
    const av = await Agentvisor.open({ db, telemetry: false })
    const store = await openStore(db)
    try {
      const run = await av.run({
        goal: 'g',
        workspace: path.join(dir, 'ws'),
        approval: 'auto',
        providers: [
          {
            name: 'p',
            kind: 'scripted',
            steps: [{ toolCalls: [{ name: 'spawn_child', arguments: { goal: 'child goal' } }] }, { text: 'child done' }, { text: 'done' }]
          }
        ]
      })
      expect(run.status).toBe('succeeded')
      const runs = await runCall(listRuns(store.db, {}))
      const child = runs.find((r) => r.parent_id === run.runId)
      expect(child).toBeDefined()
      const fork = await av.fork(run.runId, { atSeq: 1 })
      await fork.cancel()
      await fork.result
      // Derived from the parent, step and call (a hash), so a resumed parent names the same child.
      expect(child!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      for (const id of [run.runId, fork.runId]) {
        expect(id).toMatch(V7)
        const row = await runCall(getRun(store.db, id))
        // Made at the moment its row was created (the fork's row: when it was forked).
        expect(Math.abs(timeOf(id) - Date.parse(row!.created_at))).toBeLessThan(1_000)
      }
    } finally {
      await store.close()
      await av.close()
    }
  })
})
