import { readFileSync } from 'node:fs'
import * as path from 'node:path'
import { Agentvisor, RunNotFoundError } from '@agentvisor/actors'
import { loadScenarios, startMockLlm } from '@agentvisor/cli'
import { listTransitions, openStore } from '@agentvisor/store'
import { describe, expect, it } from 'vitest'
import { runWithApi } from '../examples/api-run.js'
import { lastJson, runCli, tempDir } from './support/cli.js'
import { runCall } from './support/run-call.js'

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
        const transitions = await runCall(listTransitions(store.db, result.runId))
        expect(transitions.at(-1)).toMatchObject({ to_state: 'finished.succeeded' })
      } finally {
        await store.close()
      }
    } finally {
      await mock.close()
    }
  })

  it("gives a run's trace as exactly the object show --json prints, and rejects an unknown id with RunNotFoundError", async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const av = await Agentvisor.open({ db })
    try {
      const result = await av.run({
        goal: 'Write DONE into out.txt',
        workspace: path.join(dir, 'ws'),
        providers: [
          {
            name: 'p',
            kind: 'scripted',
            steps: [
              { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }], usage: { inputTokens: 40, outputTokens: 9 } },
              { text: 'Wrote it.', usage: { inputTokens: 60, outputTokens: 3 } }
            ]
          }
        ],
        approval: 'auto'
      })
      expect(result.status).toBe('succeeded')
      const trace = await av.trace(result.runId)
      const shown = await runCli(['show', result.runId, '--json', '--db', db])
      expect(shown.code, shown.stderr).toBe(0)
      expect(trace).toStrictEqual(lastJson(shown))
      // The trace is the run's, not an empty shell that happens to match.
      expect(trace.run).toMatchObject({ id: result.runId, status: 'succeeded', usage: { inputTokens: 100, outputTokens: 12 } })
      expect(trace.steps.map((step) => step.toolCalls.map((call) => call.name))).toEqual([['write_file'], []])
      expect(trace.steps[1]!.text).toBe('Wrote it.')

      const unknown = await av.trace('no-such-run').then(
        () => undefined,
        (error: unknown) => error
      )
      expect(unknown).toBeInstanceOf(RunNotFoundError)
      expect(unknown).toMatchObject({ _tag: 'RunNotFoundError', runId: 'no-such-run', message: 'no run with id no-such-run' })
      const missing = await runCli(['show', 'no-such-run', '--json', '--db', db])
      expect(missing.code).toBe(2)
      expect(missing.stderr.trim()).toBe('agentvisor: no run with id no-such-run')
    } finally {
      await av.close()
    }
  })
})
