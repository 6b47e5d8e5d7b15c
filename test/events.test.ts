import { spawnSync } from 'node:child_process'
import type { TaskInput } from '@agentvisor/core'
import { writeFileSync } from 'node:fs'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { Agentvisor, makeNatsBus, natsBusOptionsFromEnv, type RunStreamEvent } from '@agentvisor/actors'
import { Effect, Exit, Scope } from 'effect'
import type { MockLlm } from '@agentvisor/cli'
import { afterEach, describe, expect, it } from 'vitest'
import { lastJson, runCli, startRunInBackground, tempDir, waitFor } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { natsWorldPerTest } from './support/nats.js'
import { storedTrace } from './support/stored-trace.js'

// A run's events (docs/streaming.md) over the mock LLM streaming its answers: text as it streams,
// then every durable event in seq order, the same whether read live, from the store, or from
// another process.

const MODEL = 'stream-model'
const REPLY = 'I looked at the folder and wrote the summary you asked for.'

const startMock = mockLlmPerTest(MODEL)
const natsWorld = natsWorldPerTest()
let mock: MockLlm | undefined
let av: Agentvisor | undefined
afterEach(async () => {
  await av?.close()
  av = undefined
})

const taskFor = (baseUrl: string, dir: string): TaskInput => ({
  goal: 'Write a summary into out.txt',
  workspace: path.join(dir, 'ws'),
  providers: [{ name: 'p', kind: 'openai', baseUrl, model: MODEL, stream: true }],
  pricing: { [MODEL]: { inputPerMTok: 2, outputPerMTok: 8 } },
  approval: 'auto'
})

const steps = [
  { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'summary' } }], usage: { inputTokens: 300, outputTokens: 20 } },
  { text: REPLY, usage: { inputTokens: 420, outputTokens: 15 } }
]

const collect = async (events: AsyncIterable<RunStreamEvent>): Promise<RunStreamEvent[]> => {
  const out: RunStreamEvent[] = []
  for await (const event of events) out.push(event)
  return out
}

/** The durable events' seqs never go back, and every transition seq appears once, in order from `from`. */
const expectInSeqOrder = (events: ReadonlyArray<RunStreamEvent>, from: number) => {
  const seqs = events.flatMap((e) => ('seq' in e ? [e.seq] : []))
  expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
  const transitions = events.flatMap((e) => (e.kind === 'transition' ? [e.seq] : []))
  expect(transitions).toEqual(Array.from({ length: transitions.length }, (_, i) => from + i))
}

describe('events', () => {
  it('streams the text of the answer, then its transitions in seq order, and ends with done', async () => {
    mock = await startMock(steps)
    const dir = tempDir()
    av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    const run = await av.start(taskFor(mock.url, dir))
    const events = await collect(run.events())
    const result = await run.result
    expect(result.status).toBe('succeeded')

    const texts = events.filter((e) => e.kind === 'text')
    expect(texts.map((e) => (e.kind === 'text' ? e.delta : '')).join('')).toBe(REPLY)
    expect(texts.length).toBeGreaterThan(1)
    // The text comes before the transition that records its answer.
    const answered = events.findIndex((e) => e.kind === 'transition' && e.event === 'PROVIDER_OK' && e.seq > 3)
    expect(events.findIndex((e) => e.kind === 'text')).toBeLessThan(answered)
    expectInSeqOrder(events, 1)

    // Every transition the store has, and the calls, results, usage and end.
    const trace = lastJson<{ transitions: Array<{ seq: number; event: string }> }>(await runCli(['show', run.runId, '--json', '--db', path.join(dir, 'av.db')]))
    expect(events.filter((e) => e.kind === 'transition').map((e) => (e.kind === 'transition' ? `${e.seq}:${e.event}` : ''))).toEqual(
      trace.transitions.map((t) => `${t.seq}:${t.event}`)
    )
    expect(events.filter((e) => e.kind === 'toolCall')).toEqual([
      expect.objectContaining({ name: 'write_file', arguments: { path: 'out.txt', content: 'summary' } })
    ])
    expect(events.filter((e) => e.kind === 'toolResult')).toEqual([expect.objectContaining({ name: 'write_file' })])
    expect(events.filter((e) => e.kind === 'attempt').map((e) => (e.kind === 'attempt' ? e.outcome : ''))).toEqual(['ok', 'ok'])
    const done = events.at(-1)
    expect(done).toMatchObject({ kind: 'done', status: 'succeeded', steps: 2, output: REPLY })
    expect(done?.kind === 'done' ? done.usage : undefined).toEqual({ inputTokens: 720, outputTokens: 35, costUsd: (720 * 2 + 35 * 8) / 1e6 })
    expect(events.filter((e) => e.kind === 'usage').at(-1)).toMatchObject({ usage: { inputTokens: 720, outputTokens: 35 } })
  })

  it('gives the answer of a provider that does not stream as one text event, live and replayed, before its tool calls', async () => {
    const FIRST = 'I will write the summary now.'
    const plain = [{ ...steps[0], text: FIRST }, steps[1]]
    mock = await startMock(plain)
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    av = await Agentvisor.open({ db })
    const run = await av.start({ ...taskFor(mock.url, dir), providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: MODEL, stream: false }] })
    const live = await collect(run.events())
    expect((await run.result).status).toBe('succeeded')
    expect(mock.requests.every((r) => (r.body as { stream?: boolean }).stream !== true)).toBe(true)
    const texts = (events: ReadonlyArray<RunStreamEvent>) => events.flatMap((e) => (e.kind === 'text' ? [`${e.step}.${e.attempt}:${e.delta}`] : []))
    expect(texts(live)).toEqual([`1.0:${FIRST}`, `2.0:${REPLY}`])
    // Each where a stream's pieces would be: before its answer's transition, so before its tool calls.
    const firstText = live.findIndex((e) => e.kind === 'text')
    expect(live[firstText + 1]).toMatchObject({ kind: 'transition', event: 'PROVIDER_OK' })
    expect(firstText).toBeLessThan(live.findIndex((e) => e.kind === 'toolCall'))
    // Replayed after the fact, from the store and from another process: the same list, text included.
    expect(await collect(av.events(run.runId))).toEqual(live.map((e) => (e.kind === 'text' ? { ...e, at: expect.any(String) } : e)))
    const watched = await runCli(['watch', run.runId, '--json', '--db', db])
    expect(watched.code, watched.stderr).toBe(0)
    const lines = watched.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as RunStreamEvent)
    expect(texts(lines)).toEqual(texts(live))
    expect(lines.filter((e) => e.kind !== 'text')).toEqual(live.filter((e) => e.kind !== 'text'))
  })

  it("gives a scripted provider's answer whole with stream: false, and word by word otherwise, never both", async () => {
    const dir = tempDir()
    av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    const scripted = (stream: boolean | undefined): TaskInput => ({
      goal: 'Say it',
      workspace: path.join(dir, 'ws'),
      providers: [{ name: 's', kind: 'scripted', ...(stream !== undefined ? { stream } : {}), steps: [{ text: REPLY }] }],
      approval: 'auto'
    })
    // An observer of the run listens from its first call on, however fast the script answers.
    const relayed = async (stream: boolean | undefined) => {
      const heard: string[] = []
      const run = await av!.start(scripted(stream), { observers: [{ onText: ({ delta }) => heard.push(delta) }] })
      const texts = (await collect(run.events())).flatMap((e) => (e.kind === 'text' ? [e.delta] : []))
      return { heard, texts }
    }
    const whole = await relayed(false)
    expect(whole.heard).toEqual([REPLY])
    expect(whole.texts).toEqual([REPLY])
    const streamed = await relayed(undefined)
    expect(streamed.heard.length).toBeGreaterThan(1)
    expect(streamed.heard.join('')).toBe(REPLY)
    expect(streamed.texts.join('')).toBe(REPLY)
  })

  it('streams the text of an Anthropic answer the same way', async () => {
    mock = await startMock(steps)
    const dir = tempDir()
    av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    const task: TaskInput = { ...taskFor(mock.url, dir), providers: [{ name: 'a', kind: 'anthropic', baseUrl: mock.url, model: MODEL, stream: true }] }
    const run = await av.start(task)
    const events = await collect(run.events())
    expect((await run.result).status).toBe('succeeded')
    const texts = events.filter((e) => e.kind === 'text').map((e) => (e.kind === 'text' ? e.delta : ''))
    expect(texts.join('')).toBe(REPLY)
    expect(texts.length).toBeGreaterThan(1)
    expect(mock.requests.every((r) => (r.body as { stream?: boolean }).stream === true)).toBe(true)
  })

  it('never lets a key through in streamed text, even split across pieces', async () => {
    const key = 'sk-live-0123456789abcdefghij'
    const leaky = `Sure. The key you gave me is ${key} and I will not repeat it.`
    mock = await startMock([{ text: leaky }])
    const dir = tempDir()
    av = await Agentvisor.open({ db: path.join(dir, 'av.db'), env: { MOCK_KEY: key } })
    const run = await av.start({
      ...taskFor(mock.url, dir),
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: MODEL, stream: true, apiKeyEnv: 'MOCK_KEY' }]
    })
    const events = await collect(run.events())
    const text = events.map((e) => (e.kind === 'text' ? e.delta : '')).join('')
    expect(text).toBe(leaky.replace(key, '[redacted]'))
    expect(JSON.stringify(events)).not.toContain(key)
    expect(JSON.stringify(events)).not.toContain(key.slice(0, 12))
  })

  it('yields each durable event once from any seq: a reader from fromSeq gets exactly the tail of the full list', async () => {
    mock = await startMock(steps)
    const dir = tempDir()
    av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    const run = await av.start(taskFor(mock.url, dir))
    await run.result
    const durable = (events: RunStreamEvent[]) => events.filter((e) => e.kind !== 'text')
    const all = durable(await collect(av.events(run.runId)))
    const last = all.at(-1)
    expect(last?.kind).toBe('done')
    for (let from = 1; from <= (last && 'seq' in last ? last.seq : 0); from++) {
      const tail = durable(await collect(av.events(run.runId, { fromSeq: from })))
      expect(tail).toEqual(all.filter((e) => 'seq' in e && e.seq >= from))
    }
  })

  it('reads the same events from another process with watch --json, mid-run or after', async () => {
    mock = await startMock.scenarios({
      models: {
        [MODEL]: [
          { ...steps[0], delayMs: 400 },
          { ...steps[1], delayMs: 400 }
        ]
      }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    av = await Agentvisor.open({ db })
    const run = await av.start(taskFor(mock.url, dir))
    // Started while the run waits for its first answer, ended by its end.
    const watching = runCli(['watch', run.runId, '--json', '--db', db])
    const live = await collect(run.events())
    const watched = await watching
    expect(watched.code, watched.stderr).toBe(0)
    const lines = watched.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as RunStreamEvent)
    const durable = (events: ReadonlyArray<RunStreamEvent>) => events.filter((e) => e.kind !== 'text')
    expect(durable(lines)).toEqual(durable(live))
    // After the fact, the store's history has each answer's text whole, where its pieces came live.
    const after = await runCli(['watch', run.runId, '--json', '--db', db])
    expect(after.code).toBe(0)
    const replayed = after.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as RunStreamEvent)
    expect(durable(replayed)).toEqual(durable(live))
    expect(replayed.filter((e) => e.kind === 'text')).toEqual([expect.objectContaining({ step: 2, attempt: 0, delta: REPLY })])
    expect(replayed[replayed.findIndex((e) => e.kind === 'text') + 1]).toMatchObject({ kind: 'transition', event: 'PROVIDER_OK' })
  })

  it('publishes the same events on agentvisor.runs.<id>.stream for any NATS subscriber, text included', async () => {
    mock = await startMock([{ ...steps[0], delayMs: 400 }, steps[1]])
    const dir = tempDir()
    const nats = natsBusOptionsFromEnv({}, natsWorld().env)!
    av = await Agentvisor.open({ db: path.join(dir, 'av.db'), nats })
    const scope = Effect.runSync(Scope.make())
    try {
      // Another client of the same NATS: it knows only the run id.
      const subscriber = await Effect.runPromise(Scope.extend(makeNatsBus(nats), scope))
      const run = await av.start(taskFor(mock.url, dir))
      const heard: RunStreamEvent[] = []
      await Effect.runPromise(
        Scope.extend(
          subscriber.watchStream(run.runId, (event) => heard.push(event)),
          scope
        )
      )
      const local = await collect(run.events())
      await waitFor(() => (heard.some((e) => e.kind === 'done') ? true : undefined), 'the done event on the stream')
      const durable = (events: ReadonlyArray<RunStreamEvent>) =>
        events.filter((e) => e.kind !== 'text').map((e) => Object.fromEntries(Object.entries(e).filter(([key]) => key !== 'v')))
      expect(durable(heard)).toEqual(durable(local))
      expect(heard.every((e) => (e as unknown as { v: number }).v === 1)).toBe(true)
      expect(
        heard
          .filter((e) => e.kind === 'text')
          .map((e) => (e.kind === 'text' ? e.delta : ''))
          .join('')
      ).toBe(REPLY)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  })

  it('examples/live/events.mjs streams its run, inside its budgets, eliding what its context cannot hold', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const env: NodeJS.ProcessEnv = { ...process.env, AGENTVISOR_DB: db }
    for (const key of Object.keys(env)) if (key.startsWith('AGENTVISOR_NATS')) delete env[key]
    const example = spawnSync(process.execPath, [path.join(import.meta.dirname, '..', 'examples', 'live', 'events.mjs')], { cwd: dir, env, encoding: 'utf8' })
    expect(example.status, example.stderr).toBe(0)
    expect(example.stdout).toContain('model: Let me see what is there.')
    expect(example.stdout).toMatch(/done: succeeded after 5 steps/)
    const runId = /show (\S+)/.exec(example.stdout)![1]!
    const trace = await storedTrace<{ run: { usage: { costUsd: number } }; steps: Array<{ promptSummary: string }> }>(db, runId)
    expect(trace.run.usage.costUsd).toBeGreaterThan(0)
    expect(trace.steps.at(-1)!.promptSummary).toContain('elided 1 tool result: read_file reports/alpha.md (step 2')
  })
})

describe('a driver killed mid-stream', () => {
  it('leaves the text it had streamed in the receipt, which the resume settles unknown and show reports', async () => {
    const long = 'Here is the first part of a long answer, then a second part that takes a while, and a third part at the end.'
    mock = await startMock([{ text: long, chunkDelayMs: 400 }, { text: 'done after all' }])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const file = path.join(dir, 'task.json')
    writeFileSync(file, JSON.stringify({ ...taskFor(mock.url, dir), workspace: 'ws' }))
    const started = startRunInBackground(file, db)
    const runId = await started.runId()
    // Killed once the receipt holds part of the answer and before the answer is in.
    const partial = await waitFor(() => {
      const raw = new BetterSqlite3(db, { readonly: true, fileMustExist: true })
      try {
        return (raw.prepare("SELECT partial_text FROM attempts WHERE run_id = ? AND outcome = 'pending'").pluck().get(runId) as string | null) ?? undefined
      } finally {
        raw.close()
      }
    }, 'the streamed text in the receipt')
    process.kill(started.pid(), 'SIGKILL')
    await started.done
    expect(long.startsWith(partial)).toBe(true)
    expect(partial.length).toBeLessThan(long.length)

    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    const trace = await storedTrace<{ receipts: Array<{ attempts: Array<{ outcome: string; partialText?: string }> }> }>(db, runId)
    expect(trace.receipts[0]!.attempts[0]).toMatchObject({ outcome: 'unknown', partialText: partial })
  })
})
