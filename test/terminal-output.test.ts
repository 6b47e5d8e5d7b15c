import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const ESC = '\u001b'
// What a terminal could act on: C0 but tab and newline, ESC, DEL, C1, separators, bidi controls.
const TERMINAL_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/

describe('terminal output of untrusted text', () => {
  it('exits 2 naming a task file field whose name holds an escape, with no ESC byte on stderr', async () => {
    const dir = tempDir()
    // Valid but for the one field, so that is the error reported.
    const task = writeTask(dir, { goal: 'x', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }], [`${ESC}[2Jbad`]: 1 })
    const result = await runCli(['run', task, '--db', path.join(dir, 'av.db')])
    expect(result.code).toBe(2)
    expect(result.stderr).not.toContain(ESC)
    // Quoted as every name is (docs/task-file.md, "Names in messages").
    expect(result.stderr).toContain('"\\u{1B}[2Jbad": is not a known field')
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
  })

  it('prints no control sequence of a goal, a command or a model answer in human mode, and stores the text as the model said it', async () => {
    const answer = `All done ${ESC}[2J${ESC}[31mred${ESC}[0m ${ESC}]0;pwned\u0007 csi\u009b2J rtl\u202eexe.txt`
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [{ name: 'exec', arguments: { command: `printf '${ESC}[2Jcleared'` } }] }, { text: answer }] }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, {
      goal: `Say hello ${ESC}[2J\u202e`,
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      limits: { maxSteps: 5, timeoutMs: 60_000 },
      approval: 'auto'
    })

    const run = await runCli(['run', task, '--db', db])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stderr).toMatch(/started: Say hello \\x1b\[2J\\u202e/)
    expect(run.stderr).toMatch(/exec printf '\\x1b\[2Jcleared'/)
    const runId = /run (\S+) started/.exec(run.stderr)![1]!

    const show = await runCli(['show', runId, '--db', db])
    const runs = await runCli(['runs', '--db', db])
    const showJson = await runCli(['show', runId, '--json', '--db', db])
    const runsJson = await runCli(['runs', '--json', '--db', db])
    for (const [what, output] of Object.entries({ run, show, runs, showJson, runsJson })) {
      expect(output.code, what).toBe(0)
      expect(TERMINAL_CONTROL.test(output.stdout), `${what} stdout`).toBe(false)
      expect(TERMINAL_CONTROL.test(output.stderr), `${what} stderr`).toBe(false)
    }
    expect(show.stdout).toContain('says: All done \\x1b[2J\\x1b[31mred\\x1b[0m \\x1b]0;pwned\\x07 csi\\x9b2J rtl\\u202eexe.txt')
    expect(show.stdout).toContain('\\x1b[2Jcleared')
    // The store keeps what the model said; --json shows it, escaped the JSON way.
    const trace = lastJson<{ run: { goal: string }; steps: Array<{ text: string; results: string[] }> }>(showJson)
    expect(trace.steps[1]!.text).toBe(answer)
    expect(trace.steps[0]!.results[0]).toContain(`${ESC}[2Jcleared`)
    expect(trace.run.goal).toBe(`Say hello ${ESC}[2J\u202e`)
    expect(lastJson<Array<{ goal: string }>>(runsJson)[0]!.goal).toBe(`Say hello ${ESC}[2J\u202e`)
  })
})
