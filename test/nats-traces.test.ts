import { randomBytes, randomUUID } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { AgentvisorClient, natsBusOptionsFromEnv } from '@agentvisor/actors'
import type { MockLlm } from '@agentvisor/cli'
import { afterEach, describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'
import { natsWorldPerTest } from './support/nats.js'
import { serving } from './support/workers.js'
import { mockLlmPerTest } from './support/mock-llm.js'

// Registers an OpenTelemetry SDK in each agentvisor process, as docs/telemetry.md shows, writing its spans to a file.
const SPANS_TO_FILE = fileURLToPath(new URL('./fixtures/otel/spans-to-file.mjs', import.meta.url))

interface SpanLine {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly attributes: Readonly<Record<string, unknown>>
  readonly pid: number
}

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined
let client: AgentvisorClient | undefined
afterEach(async () => {
  await client?.close()
  client = undefined
})

const natsWorld = natsWorldPerTest()
const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })
const traced = (file: string) => ({ NODE_OPTIONS: `--import=${SPANS_TO_FILE}`, AGENTVISOR_TEST_SPANS: file })
const spansIn = (file: string): SpanLine[] =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as SpanLine)
    : []
const runSpan = (spans: ReadonlyArray<SpanLine>, runId: string): SpanLine | undefined =>
  spans.find((span) => span.name === 'agentvisor.run' && span.attributes['agentvisor.run.id'] === runId)

describe('OpenTelemetry across processes', () => {
  it('makes a tree driven by a parent and two workers one trace, each child under the step that spawned it', async () => {
    mock = await startMock.scenarios({
      models: {
        m: [
          {
            toolCalls: [
              { name: 'spawn_child', arguments: { goal: 'Write part A' } },
              { name: 'spawn_child', arguments: { goal: 'Write part B' } }
            ]
          },
          write('out.txt', 'DONE')
        ]
      },
      // Each child takes a while, so each worker (one run at a time) takes one of them.
      goals: {
        'Write part A': [{ delayMs: 1500, ...write('a.txt', 'A') }, { text: 'A written' }],
        'Write part B': [{ delayMs: 1500, ...write('b.txt', 'B') }, { text: 'B written' }]
      }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const files = { parent: path.join(dir, 'parent.jsonl'), one: path.join(dir, 'worker-1.jsonl'), two: path.join(dir, 'worker-2.jsonl') }
    await serving([world.worker(db, [], traced(files.one)), world.worker(db, [], traced(files.two))])
    const task = writeTask(dir, {
      goal: 'Split the work, then write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      approval: 'auto',
      children: { maxConcurrent: 2 }
    })
    const ran = await runCli(['run', task, '--json', '--db', db], { env: { ...env, ...traced(files.parent) } })
    expect(ran.code, ran.stderr).toBe(0)
    const rootId = lastJson<{ runId: string }>(ran).runId

    const parentSpans = spansIn(files.parent)
    const root = runSpan(parentSpans, rootId)!
    expect(root).toBeDefined()
    const children = [spansIn(files.one), spansIn(files.two)].map((spans) => spans.filter((span) => span.name === 'agentvisor.run'))
    // One child on each worker, each in the root's trace, under a step span of the parent process.
    expect(children.map((runs) => runs.length)).toEqual([1, 1])
    const parentSteps = new Set(parentSpans.filter((span) => span.name === 'agentvisor.step' && span.traceId === root.traceId).map((span) => span.spanId))
    for (const [child] of children) {
      expect(child!.attributes['agentvisor.run.parent_id']).toBe(rootId)
      expect(child!.traceId).toBe(root.traceId)
      expect(parentSteps.has(child!.parentSpanId!)).toBe(true)
    }
    // And every span any of the three processes made belongs to that one trace.
    const all = [...parentSpans, ...spansIn(files.one), ...spansIn(files.two)]
    expect(new Set(all.map((span) => span.traceId))).toEqual(new Set([root.traceId]))
    expect(new Set(all.map((span) => span.pid)).size).toBe(3)
  })

  it("makes a submitted run part of the submitter's trace, under the span it names", async () => {
    mock = await startMock([write('reports/r.txt', 'R'), { text: 'written' }])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const spans = path.join(dir, 'worker.jsonl')
    const template = writeTask(
      dir,
      { goal: 'template', workspace: 'ws', providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }], approval: 'auto' },
      'template.json'
    )
    await serving([world.worker(db, ['--submit-template', template], traced(spans))])
    client = await AgentvisorClient.connect(natsBusOptionsFromEnv({}, env)!)
    const traceId = randomBytes(16).toString('hex')
    const spanId = randomBytes(8).toString('hex')
    const runId = randomUUID()
    const done = client.done(runId, 60_000)
    await client.submit({ goal: 'Write the report' }, { runId, traceparent: `00-${traceId}-${spanId}-01` })
    expect(await done).toMatchObject({ status: 'succeeded' })

    const run = runSpan(spansIn(spans), runId)
    expect(run).toMatchObject({ traceId, parentSpanId: spanId })
    expect(spansIn(spans).every((span) => span.traceId === traceId)).toBe(true)
  })
})
