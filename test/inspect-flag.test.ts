import type { ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import * as path from 'node:path'
import { type MockLlm, spawnTethered } from '@agentvisor/cli'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocketServer } from 'ws'
import { BIN, lastJson, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { natsWorldPerTest } from './support/nats.js'

/** A stand-in for the Stately relay: records every message of every connection. */
interface Receiver {
  readonly url: string
  readonly events: Array<Record<string, unknown> & { type: string }>
  /** Connections that were opened and have since closed. */
  closed: number
  opened: number
  close(): Promise<void>
}

const receivers: Receiver[] = []
let worker: ChildProcess | undefined
const startMock = mockLlmPerTest()
const natsWorld = natsWorldPerTest()
let mock: MockLlm | undefined
afterEach(async () => {
  if (worker !== undefined && worker.exitCode === null && worker.signalCode === null) {
    const exited = new Promise((resolve) => worker!.once('exit', resolve))
    worker.kill('SIGKILL')
    await exited
  }
  worker = undefined
  await Promise.all(receivers.splice(0).map((r) => r.close()))
})

const startReceiver = async (): Promise<Receiver> => {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 })
  await new Promise<void>((resolve) => server.once('listening', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('expected a TCP address')
  const receiver: Receiver = {
    url: `ws://127.0.0.1:${address.port}`,
    events: [],
    closed: 0,
    opened: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of server.clients) client.terminate()
        server.close(() => resolve())
      })
  }
  server.on('connection', (socket) => {
    receiver.opened += 1
    socket.on('message', (data) => receiver.events.push(JSON.parse(String(data))))
    socket.on('close', () => (receiver.closed += 1))
  })
  receivers.push(receiver)
  return receiver
}

/** A port on 127.0.0.1 where nothing listens (taken, then given back). */
const freePort = async (): Promise<number> => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  if (address === null || typeof address === 'string') throw new Error('expected a TCP address')
  return address.port
}

const scriptedTask = (dir: string, overrides: Record<string, unknown> = {}) =>
  writeTask(dir, {
    goal: 'Write DONE into out.txt',
    workspace: 'ws',
    approval: 'auto',
    providers: [
      { name: 'primary', kind: 'scripted', steps: [{ error: { status: 503, retryAfterMs: 0 } }] },
      { name: 'secondary', kind: 'scripted', steps: [{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }] }
    ],
    verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
    ...overrides
  })

const ofType = (receiver: Receiver, type: string) => receiver.events.filter((e) => e.type === type)
const stateValues = (receiver: Receiver) => ofType(receiver, '@xstate.snapshot').map((e) => (e['snapshot'] as { value: unknown }).value)
const eventTypes = (receiver: Receiver) => ofType(receiver, '@xstate.event').map((e) => (e['event'] as { type: string }).type)

describe('agentvisor run --inspect', () => {
  it('streams the inspection events of the run actor to a local WebSocket relay and still exits 0 when the run ends', async () => {
    const receiver = await startReceiver()
    const dir = tempDir()
    const run = await runCli(['run', scriptedTask(dir), '--json', '--db', path.join(dir, 'av.db'), '--inspect', receiver.url])
    expect(run.code, run.stderr).toBe(0)
    expect(lastJson(run)).toMatchObject({ status: 'succeeded', steps: 1 })
    expect(run.stderr).not.toContain('unreachable')
    // The CLI closed its socket itself: that is how it could exit.
    await waitFor(() => (receiver.closed === 1 ? true : undefined), 'the inspector socket to close')
    expect(receiver.opened).toBe(1)

    // The run's actor is named by the run id, and is its session, in every process that drives it.
    const runId = lastJson<{ runId: string }>(run).runId
    const actors = ofType(receiver, '@xstate.actor')
    expect(actors).toHaveLength(1)
    expect(actors[0]).toMatchObject({ name: runId, sessionId: runId, rootId: runId, _version: expect.any(String) })
    expect(actors[0]!['parentId']).toBeUndefined()
    expect(String(actors[0]!['definition'])).toContain('awaitingApproval')
    expect(receiver.events.every((e) => e['sessionId'] === runId)).toBe(true)
    expect(eventTypes(receiver)).toEqual(['xstate.init', 'PROVIDER_ERROR', 'NEXT_PROVIDER', 'PROVIDER_OK', 'TOOLS_DONE', 'VERIFY_PASSED'])
    expect(stateValues(receiver)).toEqual([
      'dispatching',
      'fallingOver',
      'dispatching',
      'acting',
      'verifying',
      { finished: 'succeeded' },
      { finished: 'succeeded' }
    ])
  })

  it('warns once and still succeeds with exit 0 when nothing listens at the relay URL', async () => {
    const port = await freePort()
    const dir = tempDir()
    const run = await runCli(['run', scriptedTask(dir), '--json', '--db', path.join(dir, 'av.db'), `--inspect=ws://127.0.0.1:${port}`])
    expect(run.code, run.stderr).toBe(0)
    expect(lastJson(run)).toMatchObject({ status: 'succeeded', steps: 1 })
    expect(run.stderr.match(/inspector relay at ws:\/\/127\.0\.0\.1:\d+ is unreachable/g)).toHaveLength(1)
  })

  it('takes a bare --inspect before the task file as the default relay URL', async () => {
    const dir = tempDir()
    const run = await runCli(['run', '--inspect', scriptedTask(dir), '--json', '--db', path.join(dir, 'av.db')])
    expect(run.code, run.stderr).toBe(0)
    expect(lastJson(run)).toMatchObject({ status: 'succeeded' })
    expect(run.stderr).toContain('streaming inspection events to ws://127.0.0.1:8080')
  })

  it('refuses a relay URL that is not ws:// or wss:// with exit 2', async () => {
    const dir = tempDir()
    const run = await runCli(['run', scriptedTask(dir), '--db', path.join(dir, 'av.db'), '--inspect=https://stately.ai/inspect'])
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('--inspect takes the ws:// or wss:// URL of an inspector relay')
  })
})

describe('agentvisor resume --inspect', () => {
  it('streams the resumed run actor from its restored state to the end', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const paused = await runCli(['run', scriptedTask(dir, { approval: 'defer' }), '--json', '--db', db])
    expect(paused.code, paused.stderr).toBe(3)
    const runId = String(lastJson(paused)['runId'])
    expect((await runCli(['approve', runId, '--db', db])).code).toBe(0)

    const receiver = await startReceiver()
    const resumed = await runCli(['resume', runId, '--json', '--db', db, '--inspect', receiver.url])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toMatchObject({ runId, status: 'succeeded' })
    await waitFor(() => (receiver.closed === 1 ? true : undefined), 'the inspector socket to close')
    expect(stateValues(receiver)).toEqual(['awaitingApproval', 'acting', 'verifying', { finished: 'succeeded' }, { finished: 'succeeded' }])
    expect(eventTypes(receiver)).toEqual(['xstate.init', 'APPROVALS_DECIDED', 'TOOLS_DONE', 'VERIFY_PASSED'])
  })
})

describe('agentvisor worker --inspect', () => {
  it('streams the child run actors it drives and exits 0 on SIGTERM with the relay still up', async () => {
    const env = natsWorld().env
    const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })
    mock = await startMock.scenarios({
      models: {
        m: [
          { toolCalls: [{ name: 'spawn_child', arguments: { goal: 'part A', verify: { fileContains: { path: 'part.txt', text: 'A' } } } }] },
          write('out.txt', 'DONE')
        ]
      },
      goals: { 'part A': [write('part.txt', 'A')] }
    })
    const receiver = await startReceiver()
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const child = spawnTethered(process.execPath, [BIN, 'worker', '--db', db, '--inspect', receiver.url], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
      watchesTether: true
    })
    worker = child
    let log = ''
    child.stderr!.on('data', (d: Buffer) => (log += d.toString()))
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    await waitFor(() => (log.includes('serving') ? true : undefined), 'the worker')

    const task = writeTask(dir, {
      goal: 'Split the work and write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      approval: 'auto'
    })
    const run = await runCli(['run', task, '--json', '--db', db], { env })
    expect(run.code, run.stderr).toBe(0)
    expect(readFileSync(path.join(dir, 'ws', 'children', '1', 'part.txt'), 'utf8')).toBe('A')

    // Only the worker inspects: what the relay saw is the child's run actor, driven to its end.
    await waitFor(
      () => (stateValues(receiver).some((v) => JSON.stringify(v) === '{"finished":"succeeded"}') ? true : undefined),
      'the child to finish on the relay'
    )
    // Named by its run id, and linked to its parent's actor (driven by the parent's own process).
    const parentId = lastJson<{ runId: string }>(run).runId
    const childActors = ofType(receiver, '@xstate.actor')
    expect(childActors).toHaveLength(1)
    const childId = String(childActors[0]!['name'])
    expect(childId).not.toBe(parentId)
    expect(childActors[0]).toMatchObject({ sessionId: childId, parentId, rootId: parentId })
    expect(eventTypes(receiver)).toContain('VERIFY_PASSED')

    child.kill('SIGTERM')
    expect(await exited).toBe(0)
    await waitFor(() => (receiver.closed === 1 ? true : undefined), 'the worker to close its inspector socket')
  })
})
