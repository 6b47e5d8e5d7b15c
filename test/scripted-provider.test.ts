import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import { Agentvisor } from '@agentvisor/actors'
import type { TaskInput } from '@agentvisor/core'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'

// The scripted provider plays its steps one per dispatch of the run (docs/task-file.md,
// "Providers"): its position comes from the run's receipts, so a run paused on a question or an
// approval and resumed, in a new process or in this one, plays its next step, not its first again.

const QUESTION = 'Which bucket should the export go to?'
const write = (file: string, content: string) => ({ name: 'write_file', arguments: { path: file, content } })

/** Asks once, then writes what it was told, then says it is done. */
const asking = [
  { text: 'One question first.', toolCalls: [{ name: 'ask_human', arguments: { question: QUESTION } }] },
  { toolCalls: [write('out.txt', 'staging')] },
  { text: 'All done: exported to staging.' }
]
const askingTask = (workspace: string): TaskInput => ({
  goal: 'Export the report where the person says',
  workspace,
  providers: [{ name: 's', kind: 'scripted', steps: asking }],
  tools: ['ask_human', 'write_file'],
  policy: { layers: [{ name: 'team', allow: { write: ['out.txt'] } }] },
  approval: 'defer'
})

/** A write a person must approve, then one the policy allows, then the end. */
const approving = [{ toolCalls: [write('asked.txt', 'one')] }, { toolCalls: [write('out.txt', 'two')] }, { text: 'All done: both files written.' }]
const approvingTask = (workspace: string): TaskInput => ({
  goal: 'Write the two files',
  workspace,
  providers: [{ name: 's', kind: 'scripted', steps: approving }],
  policy: { layers: [{ name: 'team', allow: { write: ['out.txt'] }, ask: { write: ['asked.txt'] } }] },
  approval: 'defer'
})

interface Trace {
  readonly run: { readonly status: string }
  readonly steps: ReadonlyArray<{ readonly step: number; readonly toolCalls: ReadonlyArray<{ readonly name: string; readonly arguments: unknown }> }>
  readonly output?: unknown
}
const callsOf = (trace: Trace) => trace.steps.map((s) => s.toolCalls.map((c) => c.name))

describe('the scripted provider across a pause', () => {
  it('plays its next step after ask_human is answered and the run resumed in a new process', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, askingTask('ws'))
    const ran = await runCli(['run', task, '--json', '--db', db])
    expect(ran.code, ran.stderr).toBe(3)
    const { runId } = lastJson<{ runId: string }>(ran)
    expect((await runCli(['answer', runId, 'The staging bucket.', '--db', db])).code).toBe(0)

    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toMatchObject({ runId, status: 'succeeded', steps: 3, output: 'All done: exported to staging.' })
    const trace = lastJson<Trace>(await runCli(['show', runId, '--json', '--db', db]))
    // Step 2 is the script's second answer: the question was asked once.
    expect(callsOf(trace)).toEqual([['ask_human'], ['write_file'], []])
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('staging')
  })

  it('plays its next step after an approval is decided and the run resumed in a new process', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, approvingTask('ws'))
    const ran = await runCli(['run', task, '--json', '--db', db])
    expect(ran.code, ran.stderr).toBe(3)
    const { runId } = lastJson<{ runId: string }>(ran)
    expect((await runCli(['approve', runId, '--db', db])).code).toBe(0)

    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toMatchObject({ status: 'succeeded', steps: 3, output: 'All done: both files written.' })
    const trace = lastJson<Trace>(await runCli(['show', runId, '--json', '--db', db]))
    expect(trace.steps.map((s) => s.toolCalls.map((c) => c.arguments))).toEqual([
      [{ path: 'asked.txt', content: 'one' }],
      [{ path: 'out.txt', content: 'two' }],
      []
    ])
    expect(readFileSync(path.join(dir, 'ws', 'asked.txt'), 'utf8')).toBe('one')
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('two')
  })

  it('plays its next step after av.answer and av.approve in the same process', async () => {
    const dir = tempDir()
    const av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    try {
      const asked = await av.run(askingTask(path.join(dir, 'asked')))
      expect(asked.status).toBe('awaiting_input')
      await av.answer(asked.runId, 'The staging bucket.')
      const answered = await (await av.resume(asked.runId)).result
      expect(answered).toMatchObject({ status: 'succeeded', steps: 3, output: 'All done: exported to staging.' })
      expect(readFileSync(path.join(dir, 'asked', 'out.txt'), 'utf8')).toBe('staging')

      const paused = await av.run(approvingTask(path.join(dir, 'approved')))
      expect(paused.status).toBe('awaiting_approval')
      expect(existsSync(path.join(dir, 'approved', 'asked.txt'))).toBe(false)
      await av.approve(paused.runId, { decision: 'approve' })
      const approved = await (await av.resume(paused.runId)).result
      expect(approved).toMatchObject({ status: 'succeeded', steps: 3, output: 'All done: both files written.' })
      expect(readFileSync(path.join(dir, 'approved', 'out.txt'), 'utf8')).toBe('two')
    } finally {
      await av.close()
    }
  })

  it('gives a retry the next step of the same provider and a fall-over the next provider its own first', async () => {
    const dir = tempDir()
    const av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    try {
      const retried = await av.run({
        goal: 'g',
        workspace: path.join(dir, 'retried'),
        providers: [{ name: 's', kind: 'scripted', steps: [{ error: { status: 503, retryAfterMs: 0 } }, { text: 'All done: after one retry.' }] }]
      })
      expect(retried).toMatchObject({ status: 'succeeded', steps: 1, output: 'All done: after one retry.' })
      const fellOver = await av.run({
        goal: 'g',
        workspace: path.join(dir, 'fell-over'),
        providers: [
          { name: 'primary', kind: 'scripted', steps: [{ error: { status: 503, retryAfterMs: 0 } }] },
          { name: 'backup', kind: 'scripted', steps: [{ text: 'All done: from the backup.' }] }
        ]
      })
      expect(fellOver).toMatchObject({ status: 'succeeded', steps: 1, output: 'All done: from the backup.' })
    } finally {
      await av.close()
    }
  })
})
