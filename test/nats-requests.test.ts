import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import * as path from 'node:path'
// Only the plain NATS client: what a service in any language does (docs/nats.md).
import type { NatsConnection } from '@nats-io/transport-node'
import type { MockLlm } from '@agentvisor/cli'
import { afterEach, describe, expect, it } from 'vitest'
import { BIN, lastJson, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { natsWorldPerTest, startNatsServer } from './support/nats.js'
import { serving } from './support/workers.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined
let nc: NatsConnection | undefined
afterEach(async () => {
  // The world closes its connections itself.
  nc = undefined
})

const natsWorld = natsWorldPerTest()
const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })
const decode = (data: Uint8Array) => JSON.parse(new TextDecoder().decode(data)) as Record<string, unknown>

describe('supervising a tree from a raw NATS client', () => {
  it('hears every run start, learns of a child paused two levels down with its root, reads the tree and approves the child', async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [{ name: 'spawn_child', arguments: { goal: 'Produce part P' } }] }, write('out.txt', 'DONE')] },
      goals: { 'Produce part P': [write('part.txt', 'P'), { text: 'part written' }] }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const prefix = env['AGENTVISOR_NATS_PREFIX']!
    await serving([world.worker(db)])
    nc = await world.connect()
    const started: Record<string, unknown>[] = []
    const requests: Record<string, unknown>[] = []
    nc.subscribe(`${prefix}.runs.*.started`, {
      callback: (_error, msg) => {
        started.push(decode(msg.data))
      }
    })
    nc.subscribe(`${prefix}.requests`, {
      callback: (_error, msg) => {
        requests.push(decode(msg.data))
      }
    })
    await nc.flush()
    const ask = async (runId: string, verb: string, body: object) =>
      decode((await nc!.request(`${prefix}.control.${runId}.${verb}`, new TextEncoder().encode(JSON.stringify(body)), { timeout: 60_000 })).data)

    const task = writeTask(dir, {
      goal: 'Delegate, then write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      // out.txt is allowed; the child's part.txt asks (a child's asks wait for a decision).
      policy: { layers: [{ name: 'team', allow: { write: ['out.txt'] } }] },
      approval: 'defer'
    })
    const parent = runCli(['run', task, '--json', '--db', db], { env })

    const announced = await waitFor(() => requests[0], 'the child request on the requests subject')
    const childId = String(announced['runId'])
    const rootId = String(announced['rootId'])
    expect(announced).toMatchObject({ v: 1, request: { kind: 'approval', act: 'write', target: 'part.txt' } })
    expect(childId).not.toBe(rootId)
    expect(started).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ v: 1, runId: rootId, parentId: null, rootId, goal: 'Delegate, then write DONE into out.txt', resumed: false }),
        expect.objectContaining({ v: 1, runId: childId, parentId: rootId, rootId, goal: 'Produce part P' })
      ])
    )
    const tree = await ask(rootId, 'tree', { v: 1 })
    expect(tree).toMatchObject({ v: 1, ok: true })
    expect((tree['runs'] as Array<{ id: string; status: string }>).map((r) => [r.id, r.status])).toEqual([
      [rootId, 'running'],
      [childId, 'awaiting_approval']
    ])
    expect(await ask('no-such-run', 'tree', { v: 1 })).toMatchObject({ v: 1, ok: false })
    expect(await ask(childId, 'pending', { v: 1 })).toMatchObject({ ok: true, requests: [{ kind: 'approval', act: 'write', target: 'part.txt' }] })

    expect(await ask(childId, 'approve', { v: 1, decision: 'approve' })).toMatchObject({ v: 1, ok: true })
    const ran = await parent
    expect(ran.code, ran.stderr).toBe(0)
    expect(lastJson(ran)).toMatchObject({ runId: rootId, status: 'succeeded' })
    expect(readFileSync(path.join(dir, 'ws', 'children', '1', 'part.txt'), 'utf8')).toBe('P')
  })
})

describe('a run driven by agentvisor run --nats, with no worker running', () => {
  it('is found by its started message while the model is slow, answers status, pending and tree, and is cancelled', async () => {
    mock = await startMock([{ delayMs: 5000, ...write('out.txt', 'DONE') }])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const prefix = env['AGENTVISOR_NATS_PREFIX']!
    nc = await world.connect()
    const started: Record<string, unknown>[] = []
    nc.subscribe(`${prefix}.runs.*.started`, {
      callback: (_error, msg) => {
        started.push(decode(msg.data))
      }
    })
    await nc.flush()
    const ask = async (runId: string, verb: string, body: object) =>
      decode((await nc!.request(`${prefix}.control.${runId}.${verb}`, new TextEncoder().encode(JSON.stringify(body)), { timeout: 60_000 })).data)
    const task = writeTask(dir, {
      goal: 'Write DONE into out.txt, slowly',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      approval: 'auto'
    })
    const ran = runCli(['run', task, '--json', '--db', db], { env })
    const runId = String((await waitFor(() => started[0], 'the started message'))['runId'])
    // The model has not answered yet: the run is known by its id, and its driver answers for it.
    expect(mock.requests.length).toBeLessThanOrEqual(1)
    expect(await ask(runId, 'status', { v: 1 })).toMatchObject({ v: 1, ok: true, id: runId, status: 'running' })
    expect(await ask(runId, 'pending', { v: 1 })).toEqual({ v: 1, ok: true, requests: [] })
    expect(await ask(runId, 'tree', { v: 1 })).toMatchObject({ v: 1, ok: true, runs: [{ id: runId, status: 'running' }] })
    expect(await ask(runId, 'cancel', { v: 1 })).toMatchObject({ v: 1, ok: true })
    const result = await ran
    expect(result.code).toBe(1)
    expect(lastJson(result)).toMatchObject({ runId, status: 'cancelled' })
  })
})

describe('a run asking on its terminal under agentvisor run --nats, with no worker running', () => {
  it('lists its request with act and target over NATS, takes the approval given there, withdraws the prompt and finishes in the same process', async () => {
    mock = await startMock([write('docs/guide.md', 'G'), { text: 'written' }])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const prefix = env['AGENTVISOR_NATS_PREFIX']!
    nc = await world.connect()
    const ask = async (runId: string, verb: string, body: object) =>
      decode((await nc!.request(`${prefix}.control.${runId}.${verb}`, new TextEncoder().encode(JSON.stringify(body)), { timeout: 60_000 })).data)
    const file = writeTask(dir, {
      goal: 'Write the guide',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      policy: { layers: [{ name: 'team', ask: { write: ['docs/**'] } }] },
      approval: 'prompt'
    })
    // `script` gives the CLI a real terminal, so it asks there instead of pausing.
    const vars = Object.entries(env)
      .map(([key, value]) => `${key}=${value}`)
      .join(' ')
    const child = spawn('script', ['-qfec', `env ${vars} ${process.execPath} ${BIN} run ${file} --db ${db} --json`, '/dev/null'], {
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe']
    })
    let screen = ''
    child.stdout.on('data', (d: Buffer) => (screen += d.toString()))
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
    await waitFor(() => (screen.includes('approve? [y]es') ? true : undefined), 'the prompt on the terminal')
    const runId = /run (\S+) started/.exec(screen)![1]!

    expect(await ask(runId, 'status', { v: 1 })).toMatchObject({ ok: true, id: runId, status: 'awaiting_approval' })
    const pending = await ask(runId, 'pending', { v: 1 })
    expect(pending).toMatchObject({ ok: true, requests: [{ kind: 'approval', act: 'write', target: 'docs/guide.md', rule: 'docs/**', layer: 'team' }] })
    const requestId = (pending['requests'] as Array<{ id: string }>)[0]!.id
    expect(await ask(runId, 'approve', { v: 1, requestId, decision: 'approve' })).toEqual({ v: 1, ok: true, decided: [requestId] })

    // Nobody typed at the prompt: it is withdrawn, and the same process drives the run to its end.
    expect(await exited).toBe(0)
    expect(screen).toContain('(the request was decided elsewhere)')
    expect(readFileSync(path.join(dir, 'ws', 'docs', 'guide.md'), 'utf8')).toBe('G')
    const shown = JSON.parse((await runCli(['show', runId, '--json', '--db', db])).stdout) as {
      run: { status: string }
      approvals: Array<{ status: string; source: string }>
    }
    expect(shown.run.status).toBe('succeeded')
    expect(shown.approvals).toEqual([expect.objectContaining({ status: 'approved', source: 'nats' })])
  })
})

describe('a worker that cannot serve', () => {
  it('exits 2 with one line for an address that is not a NATS server, and for a server without JetStream', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const http = await runCli(['worker', '--nats', 'http://127.0.0.1:4222', '--db', db])
    expect(http.code).toBe(2)
    expect(http.stderr.trim().split('\n')).toEqual(['agentvisor: --nats: http://127.0.0.1:4222 is not a NATS server address: use nats://host:4222 (or tls://)'])

    // A real nats-server, started without JetStream (-js).
    const server = await startNatsServer({ jetstream: false })
    try {
      const plain = await runCli(['worker', '--nats', server.url, '--db', db])
      expect(plain.code).toBe(2)
      const lines = plain.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(/^agentvisor: the NATS server has no usable JetStream work queue AGENTVISOR_RUNS \(is JetStream enabled, -js\?\)/)
    } finally {
      await server.stop()
    }
  })
})

describe('a parent that times out while its child waits for a decision', () => {
  it('ends the child too and leaves no run unfinished and no request open', async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [{ name: 'spawn_child', arguments: { goal: 'Produce part Q' } }] }] },
      goals: { 'Produce part Q': [write('part.txt', 'Q')] }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, {
      goal: 'Delegate and wait',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      limits: { timeoutMs: 2500 },
      approval: 'defer'
    })
    const ran = await runCli(['run', task, '--json', '--db', db])
    expect(ran.code, ran.stderr).toBe(1)
    expect(lastJson(ran)).toMatchObject({ status: 'timed_out' })
    const runs = JSON.parse((await runCli(['runs', '--json', '--db', db])).stdout) as Array<{ id: string; parentId: string | null; status: string }>
    expect(runs.map((r) => r.status).sort()).toEqual(['cancelled', 'timed_out'])
    const child = runs.find((r) => r.parentId !== null)!
    const trace = lastJson<{ approvals: Array<{ status: string; resolution?: string }> }>(await runCli(['show', child.id, '--json', '--db', db]))
    expect(trace.approvals).toEqual([expect.objectContaining({ status: 'denied', resolution: 'closed' })])
  })
})
