import { createHash } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import { Agentvisor } from '@agentvisor/actors'
import { defineTool } from '@agentvisor/core'
import { describe, expect, it } from 'vitest'
import * as z from 'zod'
import { lastJson, runCli, taskInTempDir, tempDir, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { storedTrace } from './support/stored-trace.js'

// agentvisor replay (docs/replay.md): a stored run re-driven against its recorded answers with
// today's code, policy and tools, in a scratch workspace and store; the first departure reported.

const MODEL = 'replay-model'
const KEY = 'REPLAY_TEST_KEY'
const startMock = mockLlmPerTest(MODEL)

const script = [
  { toolCalls: [{ name: 'read_file', arguments: { path: 'a.txt' } }] },
  { toolCalls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: 'a.txt says hello' } }] },
  { text: 'notes written' }
]

const task = (baseUrl: string, layers: unknown[] = [{ name: 'team', allow: { read: ['**'], write: ['**'] } }]) => ({
  goal: 'Read a.txt and write notes.txt',
  workspace: 'ws',
  providers: [{ name: 'p', kind: 'openai', baseUrl, model: MODEL, apiKeyEnv: KEY }],
  verify: { fileContains: { path: 'notes.txt', text: 'hello' } },
  policy: { layers },
  approval: 'auto'
})

/** Every file of a folder with its bytes and mtime: what "untouched" means for a workspace. */
const fingerprint = (dir: string): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const file = path.join(dir, name)
    const stat = statSync(file)
    if (stat.isFile()) out[name] = `${createHash('sha256').update(readFileSync(file)).digest('hex')} ${stat.mtimeMs}`
  }
  return out
}

/** A recorded run: made against the mock LLM, which is closed afterwards (a replay never asks it). */
const recordedRun = async () => {
  const mock = await startMock(script)
  const made = taskInTempDir(task(mock.url))
  mkdirSync(path.join(made.dir, 'ws'))
  writeFileSync(path.join(made.dir, 'ws', 'a.txt'), 'hello')
  const ran = await runCli(['run', made.task, '--json', '--db', made.db], { env: { [KEY]: 'sk-test' } })
  await mock.close()
  expect(ran.code, ran.stderr).toBe(0)
  return { ...made, url: mock.url, runId: lastJson<{ runId: string }>(ran).runId }
}

interface Report {
  readonly identical: boolean
  readonly replayRunId: string
  readonly steps: { readonly recorded: number; readonly replayed: number }
  readonly departure?: { readonly step: number; readonly kind: string; readonly message: string }
}

describe('agentvisor replay', () => {
  it('replays a stored succeeded run identically, with no provider and no key, touching neither its workspace nor its store', async () => {
    const run = await recordedRun()
    const workspace = path.join(run.dir, 'ws')
    const before = {
      files: fingerprint(workspace),
      trace: await storedTrace(run.db, run.runId),
      runs: (await runCli(['runs', '--json', '--db', run.db])).stdout
    }

    const replayed = await runCli(['replay', run.runId, '--json', '--db', run.db], { env: { [KEY]: '' } })
    expect(replayed.code, replayed.stderr).toBe(0)
    const report = lastJson<Report>(replayed)
    expect(report).toMatchObject({ identical: true, steps: { recorded: 2, replayed: 2 } })
    expect(report.replayRunId).not.toBe(run.runId)
    expect(replayed.stderr).toContain('replays identically (2 of 2 steps, succeeded)')

    expect(fingerprint(workspace)).toEqual(before.files)
    expect(await storedTrace(run.db, run.runId)).toEqual(before.trace)
    // No row of the replay in the original store.
    expect((await runCli(['runs', '--json', '--db', run.db])).stdout).toBe(before.runs)
  })

  it("names the step and the write when today's task denies it", async () => {
    const run = await recordedRun()
    const today = writeTask(run.dir, task(run.url, [{ name: 'team', allow: { read: ['**'] }, deny: { write: ['notes.txt'] } }]), 'today.json')
    const replayed = await runCli(['replay', run.runId, '--task', today, '--json', '--db', run.db])
    expect(replayed.code, replayed.stderr).toBe(1)
    const report = lastJson<Report>(replayed)
    expect(report.identical).toBe(false)
    expect(report.departure).toMatchObject({ step: 2, kind: 'policy' })
    expect(report.departure!.message).toBe('step 2: policy refused write "notes.txt" (rule "notes.txt" of layer "team") in the replay; the record did not')
    expect(replayed.stderr).toContain(`run ${run.runId} departs from its record at step 2: policy refused write "notes.txt"`)
    // The original's notes are still there: the replay's refusal happened in its scratch workspace.
    expect(readFileSync(path.join(run.dir, 'ws', 'notes.txt'), 'utf8')).toBe('a.txt says hello')
  })

  it('names the first step whose tool answers differently', async () => {
    const run = await recordedRun()
    const replayFrom = path.join(run.dir, 'fixture')
    mkdirSync(replayFrom)
    writeFileSync(path.join(replayFrom, 'a.txt'), 'goodbye')
    const replayed = await runCli(['replay', run.runId, '--workspace', replayFrom, '--json', '--db', run.db])
    expect(replayed.code, replayed.stderr).toBe(1)
    expect(lastJson<Report>(replayed).departure).toEqual({
      step: 1,
      kind: 'toolResult',
      message: 'step 1: read_file {"path":"a.txt"} answered "goodbye" where the record has "hello"'
    })
    expect(readFileSync(path.join(replayFrom, 'a.txt'), 'utf8')).toBe('goodbye')
  })

  it('replays every stored success with --all --status succeeded and sums them up', async () => {
    const run = await recordedRun()
    // A second success in the same store, and a failure --status leaves out.
    const again = await runCli(['replay', run.runId, '--db', run.db])
    expect(again.code).toBe(0)
    const failing = writeTask(
      run.dir,
      { goal: 'fail', workspace: 'ws', providers: [{ name: 's', kind: 'scripted', steps: [{ error: { status: 401 } }] }] },
      'failing.json'
    )
    expect((await runCli(['run', failing, '--db', run.db])).code).toBe(1)
    const mock = await startMock(script)
    const second = writeTask(run.dir, task(mock.url), 'second.json')
    expect((await runCli(['run', second, '--db', run.db], { env: { [KEY]: 'sk-test' } })).code).toBe(0)
    await mock.close()

    const all = await runCli(['replay', '--all', '--status', 'succeeded', '--json', '--db', run.db])
    expect(all.code, all.stderr).toBe(0)
    const summary = lastJson<{ replayed: number; identical: number; departed: number; runs: Report[] }>(all)
    expect(summary).toMatchObject({ replayed: 2, identical: 2, departed: 0 })
    expect(all.stderr).toContain('2 runs replayed, 2 identical, 0 departed')
  })

  it('refuses an unknown run and a run that has not ended with one line and exit 2', async () => {
    const { db, task: file } = taskInTempDir({
      goal: 'wait',
      workspace: 'ws',
      providers: [{ name: 's', kind: 'scripted', steps: [{ toolCalls: [{ name: 'write_file', arguments: { path: 'x', content: 'y' } }] }] }],
      approval: 'defer'
    })
    const paused = await runCli(['run', file, '--json', '--db', db])
    expect(paused.code).toBe(3)
    const runId = lastJson<{ runId: string }>(paused).runId
    const refused = await runCli(['replay', runId, '--db', db])
    expect(refused.code).toBe(2)
    expect(refused.stderr.trim()).toBe(`agentvisor: run ${runId} cannot be replayed: it has not ended (awaiting_approval): replay replays ended runs`)
    const unknown = await runCli(['replay', 'nope', '--db', db])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr.trim()).toBe('agentvisor: no run with id nope')
    const badTask = writeTask(path.dirname(db), { goal: 'g', workspace: 'ws', providers: [] }, 'bad.json')
    const bad = await runCli(['replay', runId, '--task', badTask, '--db', db])
    expect(bad.code).toBe(2)
    expect(bad.stderr.trim().split('\n')).toHaveLength(1)
    expect(bad.stderr).toContain('providers')
    const both = await runCli(['replay', runId, '--all', '--db', db])
    expect(both.code).toBe(2)
    expect(both.stderr.trim()).toBe('agentvisor: give a RUN or --all, not both')
  })

  it("answers the replay's asks with the record's decisions: an approved write and a denied one replay identically", async () => {
    const mock = await startMock([
      {
        toolCalls: [
          { name: 'write_file', arguments: { path: 'notes.txt', content: 'hello' } },
          { name: 'write_file', arguments: { path: 'secret.txt', content: 'x' } }
        ]
      },
      { text: 'done' }
    ])
    const made = taskInTempDir({ ...task(mock.url, [{ name: 'team', allow: { read: ['**'] }, ask: { write: ['**'] } }]), approval: 'defer' })
    const paused = await runCli(['run', made.task, '--json', '--db', made.db], { env: { [KEY]: 'sk-test' } })
    expect(paused.code, paused.stderr).toBe(3)
    const { runId } = lastJson<{ runId: string }>(paused)
    const pending = await storedTrace<{ approvals: Array<{ id: string; target: string }> }>(made.db, runId)
    const secret = pending.approvals.find((a) => a.target === 'secret.txt')!
    expect((await runCli(['approve', runId, secret.id, '--deny', '--db', made.db])).code).toBe(0)
    expect((await runCli(['approve', runId, '--db', made.db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--db', made.db], { env: { [KEY]: 'sk-test' } })
    await mock.close()
    expect(resumed.code, resumed.stderr).toBe(0)

    const replayed = await runCli(['replay', runId, '--json', '--db', made.db])
    expect(replayed.code, replayed.stderr).toBe(0)
    expect(lastJson<Report>(replayed)).toMatchObject({ identical: true, steps: { recorded: 1, replayed: 1 } })
  })

  it("replays a stalled run to the same end, and departs where today's task no longer stops it", async () => {
    const readA = { toolCalls: [{ name: 'read_file', arguments: { path: 'a.txt' } }] }
    const mock = await startMock([readA, readA, readA, readA])
    const stalling = { ...task(mock.url), verify: undefined, limits: { maxSteps: 8, stall: { window: 6, repeats: 3 } } }
    const made = taskInTempDir(stalling)
    mkdirSync(path.join(made.dir, 'ws'))
    writeFileSync(path.join(made.dir, 'ws', 'a.txt'), 'hello')
    const ran = await runCli(['run', made.task, '--json', '--db', made.db], { env: { [KEY]: 'sk-test' } })
    await mock.close()
    expect(lastJson<{ error: { kind: string } }>(ran).error.kind).toBe('stalled')
    const { runId } = lastJson<{ runId: string }>(ran)

    const same = await runCli(['replay', runId, '--json', '--db', made.db])
    expect(same.code, same.stderr).toBe(0)
    expect(lastJson<Report>(same)).toMatchObject({ identical: true, steps: { recorded: 4, replayed: 4 } })

    const unwatched = writeTask(made.dir, { ...stalling, limits: { maxSteps: 8 } }, 'today.json')
    const departed = await runCli(['replay', runId, '--task', unwatched, '--json', '--db', made.db])
    expect(departed.code, departed.stderr).toBe(1)
    // The record's 3rd result carries the stall warning; today's run gives none.
    expect(lastJson<Report>(departed).departure).toMatchObject({
      step: 3,
      kind: 'toolResult',
      message: expect.stringContaining('where the record has "hello\\n\\n[agentvisor] This exact call')
    })
  })

  it('re-drives every turn of a run that took follow-ups, each message sent where the record got it, and departs in the turn a change reaches', async () => {
    const turns = [
      [
        { toolCalls: [{ name: 'read_file', arguments: { path: 'a.txt' } }] },
        { toolCalls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: 'hello' } }] },
        { text: 'All done: notes written.' }
      ],
      [{ toolCalls: [{ name: 'write_file', arguments: { path: 'b.txt', content: 'b' } }] }, { text: 'All done: b.txt written.' }],
      [{ toolCalls: [{ name: 'write_file', arguments: { path: 'c.txt', content: 'c' } }] }, { text: 'All done: c.txt written.' }]
    ]
    const messages = ['Now write b into b.txt', 'And c into c.txt']
    const followUpTask = (baseUrl: string, layers: unknown[] = [{ name: 'team', allow: { read: ['**'], write: ['**'] } }]) => ({
      ...task(baseUrl, layers),
      verify: undefined
    })
    // A run of 1 + `followUps` turns, recorded against the mock LLM; the replays never ask it.
    const recordWith = async (dir: string, db: string, followUps: number) => {
      const mock = await startMock(turns.slice(0, followUps + 1).flat())
      const file = writeTask(dir, followUpTask(mock.url), `task-${followUps}.json`)
      const ran = await runCli(['run', file, '--json', '--db', db], { env: { [KEY]: 'sk-test' } })
      expect(ran.code, ran.stderr).toBe(0)
      const { runId } = lastJson<{ runId: string }>(ran)
      for (const message of messages.slice(0, followUps)) {
        const sent = await runCli(['send', runId, message, '--json', '--db', db], { env: { [KEY]: 'sk-test' } })
        expect(sent.code, sent.stderr).toBe(0)
      }
      await mock.close()
      return { runId, url: mock.url }
    }
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    mkdirSync(path.join(dir, 'ws'))
    writeFileSync(path.join(dir, 'ws', 'a.txt'), 'hello')
    const one = await recordWith(dir, db, 1)
    const two = await recordWith(dir, db, 2)

    const first = await runCli(['replay', one.runId, '--json', '--db', db])
    expect(first.code, first.stderr).toBe(0)
    const report = lastJson<Report & { notCompared?: string }>(first)
    expect(report).toMatchObject({ identical: true, steps: { recorded: 5, replayed: 5 } })
    expect(report.notCompared).toBeUndefined()
    // The replay's own run took the same follow-up, after the same step.
    const kept = await runCli(['replay', two.runId, '--keep', '--json', '--db', db])
    expect(kept.code, kept.stderr).toBe(0)
    const twice = lastJson<Report & { scratch: { db: string } }>(kept)
    expect(twice).toMatchObject({ identical: true, steps: { recorded: 7, replayed: 7 } })
    const replayTrace = await storedTrace<{ turns: Array<{ turn: number; firstStep: number; message?: string }> }>(twice.scratch.db, twice.replayRunId)
    expect(replayTrace.turns.map(({ turn, firstStep, message }) => ({ turn, firstStep, message }))).toEqual([
      { turn: 1, firstStep: 1, message: undefined },
      { turn: 2, firstStep: 4, message: messages[0] },
      { turn: 3, firstStep: 6, message: messages[1] }
    ])

    const all = await runCli(['replay', '--all', '--status', 'succeeded', '--json', '--db', db])
    expect(all.code, all.stderr).toBe(0)
    expect(lastJson(all)).toMatchObject({ replayed: 2, identical: 2, departed: 0 })

    // A change that reaches the third turn only: the replay went that far, and compared it.
    const today = writeTask(dir, followUpTask(two.url, [{ name: 'team', allow: { read: ['**'], write: ['**'] }, deny: { write: ['c.txt'] } }]), 'today.json')
    const departed = await runCli(['replay', two.runId, '--task', today, '--json', '--db', db])
    expect(departed.code, departed.stderr).toBe(1)
    expect(lastJson<Report>(departed).departure).toEqual({
      step: 6,
      kind: 'policy',
      message: 'step 6: policy refused write "c.txt" (rule "c.txt" of layer "team") in the replay; the record did not'
    })
  })

  it('replays from TypeScript with the tools registered on the Agentvisor, and names the step whose tool changed', async () => {
    let answer = 'T-42 is about billing'
    const lookup = defineTool({
      name: 'lookup_ticket',
      description: 'A ticket by id',
      input: z.object({ id: z.string() }),
      effect: 'read',
      run: () => answer
    })
    const dir = tempDir()
    const av = await Agentvisor.open({ db: path.join(dir, 'av.db'), tools: [lookup] })
    try {
      const run = await av.run({
        goal: 'Summarise T-42',
        workspace: path.join(dir, 'ws'),
        providers: [{ name: 's', kind: 'scripted', steps: [{ toolCalls: [{ name: 'lookup_ticket', arguments: { id: 'T-42' } }] }, { text: 'billing' }] }],
        tools: ['lookup_ticket']
      })
      expect(run.status).toBe('succeeded')
      expect(await av.replay(run.runId)).toMatchObject({ identical: true, steps: { recorded: 2, replayed: 2 } })
      answer = 'T-42 is about shipping'
      const report = await av.replay(run.runId)
      expect(report.identical).toBe(false)
      expect(report.departure).toEqual({
        step: 1,
        kind: 'toolResult',
        message: 'step 1: lookup_ticket {"id":"T-42"} answered "T-42 is about shipping" where the record has "T-42 is about billing"'
      })
      await expect(av.replay('nope')).rejects.toMatchObject({ _tag: 'RunNotFoundError' })
    } finally {
      await av.close()
    }
  })
})
