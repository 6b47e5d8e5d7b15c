import { mkdtempSync } from 'node:fs'
import { randomUUID } from 'node:crypto'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { SpanKind, trace } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { Effect } from 'effect'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { Agentvisor, formatTraceparent, loadRunTrace, remoteContext, SpanAttribute, SpanName, TRANSITION_EVENT } from '@agentvisor/actors'
import { defineTool } from '@agentvisor/core'
import { openStore } from '@agentvisor/store'
import { startMockLlm, type MockLlm } from '../../cli/src/mock-llm/index.js'

const exporter = new InMemorySpanExporter()
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })

beforeAll(() => {
  expect(trace.setGlobalTracerProvider(provider)).toBe(true)
})
afterAll(async () => {
  trace.disable()
  await provider.shutdown()
})

let av: Agentvisor | undefined
let mock: MockLlm | undefined
afterEach(async () => {
  await av?.close()
  av = undefined
  await mock?.close()
  mock = undefined
  exporter.reset()
})

const tempDir = () => mkdtempSync(path.join(tmpdir(), 'av-telemetry-'))

const loadTrace = async (db: string, runId: string) => {
  const store = await openStore(db)
  try {
    return (await Effect.runPromise(loadRunTrace(store.db, runId)))!
  } finally {
    await store.close()
  }
}

const named = (spans: ReadonlyArray<ReadableSpan>, name: string) => spans.filter((s) => s.name === name)
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId
const idOf = (span: ReadableSpan) => span.spanContext().spanId

/** Everything a span carries that an exporter would send. */
const exported = (span: ReadableSpan) =>
  JSON.stringify({
    name: span.name,
    attributes: span.attributes,
    events: span.events,
    status: span.status,
    links: span.links,
    resource: span.resource.attributes
  })

describe('OpenTelemetry spans of a run', () => {
  it('emits one attempt span per receipt row, nested under its step and run, with the receipt attributes and no secret', async () => {
    const apiKey = `sk-test-${randomUUID()}`
    const secret = `password=${randomUUID()}`
    mock = await startMockLlm({
      port: 0,
      scenarios: {
        models: {
          flaky: [
            { error: { status: 503, retryAfterMs: 0 } },
            { toolCalls: [{ name: 'read_file', arguments: { path: 'notes.txt' } }] },
            { text: 'All written.' }
          ],
          steady: [{ toolCalls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: secret } }] }]
        }
      }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    av = await Agentvisor.open({ db, env: { AV_TELEMETRY_KEY: apiKey } })
    const result = await av.run({
      goal: 'Keep a note',
      workspace: path.join(dir, 'ws'),
      approval: 'auto',
      providers: [
        { name: 'primary', kind: 'openai', baseUrl: mock.url, model: 'flaky', apiKeyEnv: 'AV_TELEMETRY_KEY' },
        { name: 'secondary', kind: 'openai', baseUrl: mock.url, model: 'steady', apiKeyEnv: 'AV_TELEMETRY_KEY', stream: true }
      ]
    })
    expect(result).toMatchObject({ status: 'succeeded', steps: 3 })
    // The key really travelled: the spans below had the chance to see it.
    expect(mock.requests.every((r) => r.hasAuthorization)).toBe(true)

    const spans = exporter.getFinishedSpans()
    const t = await loadTrace(db, result.runId)
    const rows = t.receipts.flatMap((r) => r.attempts.map((a, index) => ({ step: r.step, index, ...a })))
    expect(rows).toHaveLength(4)

    const [run, ...otherRuns] = named(spans, SpanName.run)
    expect(otherRuns).toEqual([])
    expect(parentOf(run!)).toBeUndefined()
    expect(run!.attributes).toMatchObject({
      [SpanAttribute.runId]: result.runId,
      [SpanAttribute.status]: 'succeeded',
      [SpanAttribute.steps]: 3,
      [SpanAttribute.resumed]: false,
      [SpanAttribute.startState]: 'dispatching'
    })
    expect(run!.attributes[SpanAttribute.errorKind]).toBeUndefined()
    // Every persisted transition is an event of the run span, in order.
    expect(
      run!.events
        .filter((e) => e.name === TRANSITION_EVENT)
        .map((e) => [
          e.attributes?.[SpanAttribute.transitionSeq],
          e.attributes?.[SpanAttribute.transitionFrom],
          e.attributes?.[SpanAttribute.transitionEvent],
          e.attributes?.[SpanAttribute.transitionTo]
        ])
    ).toEqual(t.transitions.map((tr) => [tr.seq, tr.from, tr.event, tr.to]))

    const steps = named(spans, SpanName.step)
    expect(steps.map((s) => s.attributes[SpanAttribute.step]).sort()).toEqual([1, 2, 3])
    for (const step of steps) expect(parentOf(step)).toBe(idOf(run!))
    const stepSpan = (n: number) => steps.find((s) => s.attributes[SpanAttribute.step] === n)!

    const attempts = named(spans, SpanName.attempt)
    expect(attempts).toHaveLength(rows.length)
    for (const row of rows) {
      const matching = attempts.filter((s) => s.attributes[SpanAttribute.step] === row.step && s.attributes[SpanAttribute.attempt] === row.index)
      expect(matching, `attempt ${row.index} of step ${row.step}`).toHaveLength(1)
      const span = matching[0]!
      expect(span.kind).toBe(SpanKind.CLIENT)
      expect(parentOf(span)).toBe(idOf(stepSpan(row.step)))
      expect(span.attributes[SpanAttribute.runId]).toBe(result.runId)
      expect(span.attributes[SpanAttribute.provider]).toBe(row.provider)
      expect(span.attributes[SpanAttribute.reason]).toBe(row.reason)
      expect(span.attributes[SpanAttribute.outcome]).toBe(row.outcome)
      expect(span.attributes[SpanAttribute.errorKind]).toBe(row.errorKind)
      expect(span.attributes[SpanAttribute.httpStatus]).toBe(row.httpStatus)
      expect(span.attributes[SpanAttribute.latencyMs]).toBe(row.latencyMs)
      expect(span.attributes[SpanAttribute.ttftMs]).toBe(row.ttftMs ?? undefined)
      expect(span.attributes[SpanAttribute.tokensIn]).toBe(row.tokensIn)
      expect(span.attributes[SpanAttribute.tokensOut]).toBe(row.tokensOut)
      expect(span.attributes[SpanAttribute.model]).toBe(row.provider === 'primary' ? 'flaky' : 'steady')
      expect(span.status.code).toBe(row.outcome === 'ok' ? 0 : 2)
    }
    // The receipts this run must have produced, so the loop above checked real values.
    expect(rows.map((r) => [r.step, r.provider, r.reason, r.outcome, r.httpStatus])).toEqual([
      [1, 'primary', 'initial', 'failed', 503],
      [1, 'secondary', 'fallover', 'ok', undefined],
      [2, 'primary', 'initial', 'ok', undefined],
      [3, 'primary', 'initial', 'ok', undefined]
    ])
    expect(rows[1]!.ttftMs).toEqual(expect.any(Number))

    const tools = named(spans, SpanName.tool)
    expect(
      tools.map((s) => [parentOf(s), s.attributes[SpanAttribute.toolName], s.attributes[SpanAttribute.toolTarget], s.attributes[SpanAttribute.toolOk]])
    ).toEqual([
      [idOf(stepSpan(1)), 'write_file', 'notes.txt', true],
      [idOf(stepSpan(2)), 'read_file', 'notes.txt', true]
    ])
    expect(tools.map((s) => [s.attributes[SpanAttribute.toolSource], s.attributes[SpanAttribute.toolEffect]])).toEqual([
      ['builtin', 'idempotent'],
      ['builtin', 'read']
    ])

    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1)
    // The content was written and read back to the model, and the key was sent: none of it is in a span.
    expect(t.steps[0]!.toolCalls[0]!.arguments).toEqual({ path: 'notes.txt', content: secret })
    expect(t.steps[1]!.results[0]).toContain(secret)
    for (const span of spans) {
      expect(exported(span)).not.toContain(apiKey)
      expect(exported(span)).not.toContain(secret)
      expect(exported(span)).not.toContain(secret.slice('password='.length))
    }
  })

  it("gives a custom tool's span its source and effect class and none of its arguments", async () => {
    const secret = `password=${randomUUID()}`
    const stash = defineTool({
      name: 'stash',
      description: 'Keeps a value',
      input: { type: 'object', properties: { path: { type: 'string' }, value: { type: 'string' } } },
      effect: 'idempotent',
      run: () => 'kept'
    })
    mock = await startMockLlm({ port: 0, scenarios: { models: { m: [{ toolCalls: [{ name: 'stash', arguments: { path: 'vault/key', value: secret } }] }] } } })
    const dir = tempDir()
    av = await Agentvisor.open({ db: path.join(dir, 'av.db'), tools: [stash] })
    const result = await av.run({
      goal: 'Keep a value',
      workspace: path.join(dir, 'ws'),
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      tools: ['stash'],
      policy: { layers: [{ name: 'team', allow: { tool: ['stash'] } }] }
    })
    expect(result).toMatchObject({ status: 'succeeded', steps: 2 })
    const [span, ...others] = named(exporter.getFinishedSpans(), SpanName.tool)
    expect(others).toEqual([])
    expect(span!.attributes).toMatchObject({
      [SpanAttribute.toolName]: 'stash',
      [SpanAttribute.toolSource]: 'module',
      [SpanAttribute.toolEffect]: 'idempotent'
    })
    expect(span!.attributes[SpanAttribute.toolTarget]).toBeUndefined()
    expect(exported(span!)).not.toContain('vault/key')
    expect(exported(span!)).not.toContain(secret)
  })

  it('marks the run span as an error with the kind and HTTP status of an auth failure', async () => {
    const dir = tempDir()
    av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    const result = await av.run({
      goal: 'g',
      workspace: path.join(dir, 'ws'),
      providers: [{ name: 'primary', kind: 'scripted', steps: [{ error: { status: 401 } }] }]
    })
    expect(result).toMatchObject({ status: 'failed', error: { kind: 'auth', httpStatus: 401 } })
    const spans = exporter.getFinishedSpans()
    const [run] = named(spans, SpanName.run)
    expect(run!.attributes).toMatchObject({
      [SpanAttribute.status]: 'failed',
      [SpanAttribute.steps]: 0,
      [SpanAttribute.errorKind]: 'auth',
      [SpanAttribute.errorHttpStatus]: 401,
      [SpanAttribute.errorProvider]: 'primary'
    })
    expect(run!.status).toEqual({ code: 2, message: 'failed: auth' })
    const attempts = named(spans, SpanName.attempt)
    expect(attempts.map((s) => [s.attributes[SpanAttribute.outcome], s.attributes[SpanAttribute.errorKind], s.attributes[SpanAttribute.httpStatus]])).toEqual([
      ['failed', 'auth', 401]
    ])
    expect(named(spans, SpanName.step)).toHaveLength(1)
  })

  const startSlowRun = async (dir: string) => {
    let dispatched!: () => void
    const dispatching = new Promise<void>((resolve) => (dispatched = resolve))
    av = await Agentvisor.open({ db: path.join(dir, 'av.db'), observers: [{ onDispatch: () => dispatched() }] })
    const run = await av.start({
      goal: 'g',
      workspace: path.join(dir, 'ws'),
      providers: [{ name: 'primary', kind: 'scripted', steps: [{ delayMs: 60_000, text: 'too late' }] }]
    })
    await dispatching
    return run
  }

  it('settles the attempt span cancelled and ends the run span cancelled, not as an error, when a run is cancelled mid-call', async () => {
    const dir = tempDir()
    const run = await startSlowRun(dir)
    await run.cancel()
    expect(await run.result).toMatchObject({ status: 'cancelled', error: { kind: 'cancelled' } })

    const spans = exporter.getFinishedSpans()
    expect(spans.map((s) => s.name).sort()).toEqual([SpanName.attempt, SpanName.run, SpanName.step].sort())
    const [runSpan] = named(spans, SpanName.run)
    expect(runSpan!.attributes).toMatchObject({ [SpanAttribute.status]: 'cancelled', [SpanAttribute.errorKind]: 'cancelled' })
    expect(runSpan!.status.code).toBe(0)
    const [attempt] = named(spans, SpanName.attempt)
    expect(attempt!.attributes).toMatchObject({ [SpanAttribute.outcome]: 'cancelled', [SpanAttribute.provider]: 'primary' })
    const t = await loadTrace(path.join(dir, 'av.db'), run.runId)
    expect(t.receipts[0]!.attempts[0]!.outcome).toBe('cancelled')
  })

  it('ends every span when the runtime closes under a run, marking the run span interrupted and the run still running', async () => {
    const dir = tempDir()
    const run = await startSlowRun(dir)
    await av!.close()
    await expect(run.result).rejects.toBeDefined()

    const spans = exporter.getFinishedSpans()
    expect(spans.map((s) => s.name).sort()).toEqual([SpanName.attempt, SpanName.run, SpanName.step].sort())
    const [runSpan] = named(spans, SpanName.run)
    expect(runSpan!.attributes).toMatchObject({ [SpanAttribute.runId]: run.runId, [SpanAttribute.status]: 'running', [SpanAttribute.interrupted]: true })
    expect(runSpan!.attributes[SpanAttribute.steps]).toBeUndefined()
  })

  it('sends spans to an explicitly given tracer provider instead of the global one', async () => {
    const ownExporter = new InMemorySpanExporter()
    const own = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(ownExporter)] })
    const dir = tempDir()
    av = await Agentvisor.open({ db: path.join(dir, 'av.db'), telemetry: { tracerProvider: own } })
    const result = await av.run({ goal: 'g', workspace: path.join(dir, 'ws'), providers: [{ name: 'primary', kind: 'scripted', steps: [{ text: 'done' }] }] })
    expect(result.status).toBe('succeeded')
    expect(
      ownExporter
        .getFinishedSpans()
        .map((s) => s.name)
        .sort()
    ).toEqual([SpanName.attempt, SpanName.run, SpanName.step].sort())
    expect(exporter.getFinishedSpans()).toEqual([])
    await own.shutdown()
  })
})

describe('W3C trace context of runs handed to other processes', () => {
  it('reads a version-00 traceparent as a remote parent and writes one back from a span context', () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    const remote = trace.getSpanContext(remoteContext(traceparent)!)

    expect(remote).toEqual({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1, isRemote: true })
    expect(formatTraceparent(remote!)).toBe(traceparent)
  })

  it('ignores what is not a valid traceparent, and gives none for a span nobody records', () => {
    for (const bad of [
      '',
      'garbage',
      '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01'
    ])
      expect(remoteContext(bad)).toBeUndefined()
    expect(formatTraceparent({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 0 })).toBeUndefined()
  })
})
