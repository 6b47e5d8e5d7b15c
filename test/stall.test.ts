import { readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, taskInTempDir } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { storedTrace } from './support/stored-trace.js'

// limits.stall (docs/task-file.md, "Stalls"): a model that repeats one call, or makes no progress,
// is warned once and then ended `failed` with kind `stalled`; no model call follows the end.

const MODEL = 'stall-model'

const startMock = mockLlmPerTest(MODEL)
let mock: MockLlm | undefined

interface Body {
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content?: string | null }>
}
const bodies = (m: MockLlm): Body[] => m.requests.map((r) => r.body as Body)
const lastMessage = (body: Body): string => body.messages.at(-1)?.content ?? ''

interface Trace {
  readonly run: { readonly status: string; readonly error?: { readonly kind: string; readonly message: string } }
  readonly steps: ReadonlyArray<{ readonly step: number; readonly results?: ReadonlyArray<string> | null }>
}

const readA = { toolCalls: [{ name: 'read_file', arguments: { path: 'a.txt' } }] }

const repeatTask = (baseUrl: string, extra: Record<string, unknown> = {}) => ({
  goal: 'Read a.txt',
  workspace: 'ws',
  providers: [{ name: 'p', kind: 'openai', baseUrl, model: MODEL }],
  limits: { maxSteps: 10, stall: { window: 6, repeats: 3 } },
  policy: { layers: [{ name: 'team', allow: { read: ['**'] } }] },
  approval: 'auto',
  ...extra
})

const seedWorkspace = (dir: string): void => {
  mkdirSync(path.join(dir, 'ws'), { recursive: true })
  writeFileSync(path.join(dir, 'ws', 'a.txt'), 'the same text every time')
}

const events = async (db: string, runId: string): Promise<Array<Record<string, unknown>>> => {
  const watched = await runCli(['watch', runId, '--json', '--db', db])
  return watched.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

describe('stall detection', () => {
  it('warns after the 3rd identical read_file and ends the run stalled at the 4th, with no further model call', async () => {
    // A fifth answer is scripted: the run must end before anyone asks for it.
    mock = await startMock([readA, readA, readA, readA, { text: 'done' }])
    const { dir, db, task } = taskInTempDir(repeatTask(mock.url))
    seedWorkspace(dir)
    const ran = await runCli(['run', task, '--json', '--db', db])
    expect(ran.code, ran.stderr).toBe(1)
    const result = lastJson<{ runId: string; status: string; steps: number; error: { kind: string; message: string } }>(ran)
    expect(result.status).toBe('failed')
    expect(result.error.kind).toBe('stalled')
    expect(result.error.message).toContain('read_file {"path":"a.txt"}')
    expect(result.error.message).toContain('4 times within 6 steps')

    const sent = bodies(mock)
    expect(sent).toHaveLength(4)
    // The model was told after the 3rd call, not before.
    expect(lastMessage(sent[2]!)).not.toContain('[agentvisor]')
    expect(lastMessage(sent[3]!)).toContain('This exact call (the same tool with the same arguments) has now been made 3 times within 6 steps')

    const trace = await storedTrace<Trace>(db, result.runId)
    expect(trace.run.status).toBe('failed')
    expect(trace.run.error?.kind).toBe('stalled')
    expect(trace.steps).toHaveLength(4)
    expect(trace.steps[2]!.results?.[0]).toContain('has now been made 3 times')
    expect(trace.steps[0]!.results?.[0]).toBe('the same text every time')
    // The 4th call never ran: the step has no results.
    expect(trace.steps[3]!.results ?? []).toEqual([])

    const stream = await events(db, result.runId)
    const stalls = stream.filter((e) => e['kind'] === 'stall')
    expect(stalls).toEqual([
      expect.objectContaining({ phase: 'warned', rule: 'repeat', name: 'read_file', step: 3 }),
      expect.objectContaining({ phase: 'stalled', step: 4, message: result.error.message })
    ])
  })

  it('judges the same after a pause and a resume: the count goes on from the stored steps', async () => {
    const writeB = { toolCalls: [...readA.toolCalls, { name: 'write_file', arguments: { path: 'b.txt', content: 'b' } }] }
    mock = await startMock([readA, writeB, readA, readA, { text: 'done' }])
    const { dir, db, task } = taskInTempDir(
      repeatTask(mock.url, { approval: 'defer', policy: { layers: [{ name: 'team', allow: { read: ['**'] }, ask: { write: ['**'] } }] } })
    )
    seedWorkspace(dir)
    const paused = await runCli(['run', task, '--json', '--db', db])
    expect(paused.code, paused.stderr).toBe(3)
    const { runId } = lastJson<{ runId: string }>(paused)
    expect((await runCli(['approve', runId, '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(1)
    expect(lastJson<{ error: { kind: string } }>(resumed).error.kind).toBe('stalled')
    expect(readFileSync(path.join(dir, 'ws', 'b.txt'), 'utf8')).toBe('b')
    expect(bodies(mock)).toHaveLength(4)
    expect(lastMessage(bodies(mock)[3]!)).toContain('has now been made 3 times')
  })

  it('warns after window steps without progress and ends the run at the next, telling the model in its feedback', async () => {
    // The model keeps saying it is done; verification keeps failing the same way.
    mock = await startMock([])
    const { db, task } = taskInTempDir({
      goal: 'Write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: MODEL }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      limits: { maxSteps: 20, stall: { window: 3 } },
      approval: 'auto'
    })
    const ran = await runCli(['run', task, '--json', '--db', db])
    expect(ran.code, ran.stderr).toBe(1)
    const result = lastJson<{ runId: string; status: string; steps: number; error: { kind: string; message: string } }>(ran)
    expect(result.error).toMatchObject({ kind: 'stalled', message: expect.stringContaining('4 steps in a row without a new tool result') })
    // Step 1's feedback is new; steps 2-4 bring nothing new (the 4th is warned), step 5 ends it.
    const sent = bodies(mock)
    expect(sent).toHaveLength(5)
    expect(lastMessage(sent[3]!)).not.toContain('[agentvisor]')
    expect(lastMessage(sent[4]!)).toContain('3 steps in a row brought no new tool result')
    const stream = await events(db, result.runId)
    expect(stream.filter((e) => e['kind'] === 'stall').map((e) => [e['phase'], e['rule'], e['step']])).toEqual([
      ['warned', 'noProgress', 4],
      ['stalled', undefined, 5]
    ])
  })

  it('is off without limits.stall: the same call repeats until the step cap', async () => {
    mock = await startMock(Array.from({ length: 6 }, () => readA))
    const { dir, db, task } = taskInTempDir({ ...repeatTask(mock.url), limits: { maxSteps: 6 } })
    seedWorkspace(dir)
    const ran = await runCli(['run', task, '--json', '--db', db])
    expect(lastJson<{ status: string }>(ran).status).toBe('step_cap')
    expect(bodies(mock)).toHaveLength(6)
    expect(bodies(mock).some((b) => lastMessage(b).includes('[agentvisor]'))).toBe(false)
  })

  it('refuses a stall setting below 2 with a one-line error naming the field', async () => {
    const { db, task } = taskInTempDir({
      goal: 'x',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'scripted', steps: [] }],
      limits: { stall: { window: 6, repeats: 1 } }
    })
    const ran = await runCli(['run', task, '--db', db])
    expect(ran.code).toBe(2)
    expect(ran.stderr.trim().split('\n')).toHaveLength(1)
    expect(ran.stderr).toContain('limits.stall.repeats')
  })

  it("stalls a child on its own, with its parent's setting, and the parent gets the child's failed result", async () => {
    const childGoal = 'Read a.txt again and again'
    mock = await startMock.scenarios({
      models: { [MODEL]: [] },
      goals: {
        'Delegate the reading': [{ toolCalls: [{ name: 'spawn_child', arguments: { goal: childGoal } }] }, { text: 'the child gave up' }],
        [childGoal]: [readA, readA, readA, readA, readA, { text: 'never asked for' }]
      }
    })
    const { db, task } = taskInTempDir({ ...repeatTask(mock.url), goal: 'Delegate the reading' })
    const ran = await runCli(['run', task, '--json', '--db', db])
    expect(ran.code, ran.stderr).toBe(0)
    const parent = lastJson<{ runId: string }>(ran)
    const shown = await storedTrace<Trace & { children: Array<{ id: string; status: string }> }>(db, parent.runId)
    expect(shown.children).toHaveLength(1)
    expect(shown.children[0]!.status).toBe('failed')
    // A first-edition task: the parent is told in a line of text, naming the child and why it ended.
    expect(shown.steps[0]!.results![0]).toContain(`Child run ${shown.children[0]!.id} failed after 4 steps (stalled: read_file {"path":"a.txt"} called 4 times`)
    const child = await storedTrace<Trace>(db, shown.children[0]!.id)
    expect(child.run.error).toMatchObject({ kind: 'stalled', message: expect.stringContaining('4 times within 6 steps') })
    // The child's fifth answer was never asked for: 4 child requests and the parent's 2.
    expect(bodies(mock)).toHaveLength(6)
  })
})
