import { readFileSync } from 'node:fs'
import * as path from 'node:path'
import { loadScenarios, startMockLlm } from '@agentvisor/cli'
import { listTransitions, openStore } from '@agentvisor/store'
import { describe, expect, it } from 'vitest'
import { runWithApi } from '../examples/api-run.js'
import { tempDir } from './support/cli.js'

describe('the TypeScript API', () => {
  it('runs the example task without the CLI and leaves its trace in the store', async () => {
    const scenarios = await loadScenarios(path.join(import.meta.dirname, '..', 'examples', 'single-agent', 'scenarios.json'))
    const mock = await startMockLlm({ scenarios, port: 0 })
    try {
      const dir = tempDir()
      const db = path.join(dir, 'av.db')
      const result = await runWithApi({ db, baseUrl: mock.url, workspace: path.join(dir, 'ws') })
      // Its output is the answer of its last step, not the plan line its first step began with.
      expect(result).toMatchObject({ status: 'succeeded', steps: 3, output: 'All done: out.txt says DONE, after the two-line plan in notes/plan.md.' })
      expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE\n')
      expect(readFileSync(path.join(dir, 'ws', 'notes', 'plan.md'), 'utf8')).toContain('Write DONE')
      expect(mock.requests).toHaveLength(3)
      const store = await openStore(db)
      try {
        const transitions = await listTransitions(store.db, result.runId)
        expect(transitions.at(-1)).toMatchObject({ to_state: 'finished.succeeded' })
      } finally {
        await store.close()
      }
    } finally {
      await mock.close()
    }
  })
})
