import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Agentvisor } from '@agentvisor/actors'
import { getRun, listTransitions, openStore } from '@agentvisor/store'
import { runCall } from '../../../test/support/run-call.js'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const listDir = { toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] }

/** Asks `probe` every 10 ms until it answers something, for at most `ms`. */
const eventually = async <A>(probe: () => Promise<A | undefined>, ms = 20_000): Promise<A> => {
  const until = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > until) throw new Error(`nothing within ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe("a run's row", () => {
  it('is brought to where the journal is while the run waits after commits that left it for later, and is current once the run ends', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'av-run-row-'))
    dirs.push(dir)
    const db = path.join(dir, 'av.db')
    const av = await Agentvisor.open({ db, telemetry: false })
    const store = await openStore(db)
    try {
      // Eight quick steps (their commits change no status), then a model call that does not answer.
      const started = await av.start({
        goal: 'g',
        workspace: path.join(dir, 'ws'),
        approval: 'auto',
        limits: { maxSteps: 20 },
        providers: [{ name: 'p', kind: 'scripted', steps: [...Array.from({ length: 8 }, () => listDir), { delayMs: 60_000, text: 'late' }] }]
      })
      // The journal's last transition enters the ninth dispatch; the row catches up with it.
      const row = await eventually(async () => {
        const run = await runCall(getRun(store.db, started.runId))
        return run?.state === 'dispatching' && run.steps === 8 ? run : undefined
      })
      const transitions = await runCall(listTransitions(store.db, started.runId))
      expect(transitions.at(-1)).toMatchObject({ to_state: 'dispatching', at: row.updated_at })
      expect(row.status).toBe('running')
      await started.cancel()
      expect((await started.result).status).toBe('cancelled')
      const ended = await runCall(getRun(store.db, started.runId))
      const last = (await runCall(listTransitions(store.db, started.runId))).at(-1)!
      expect(ended).toMatchObject({ status: 'cancelled', state: 'finished.cancelled', steps: 8, updated_at: last.at })
    } finally {
      await store.close()
      await av.close()
    }
  })
})
