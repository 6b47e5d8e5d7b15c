import type { ChildProcess } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { AgentvisorClient } from '@agentvisor/actors'
import BetterSqlite3 from 'better-sqlite3'
import { startMockLlm, type MockLlm, spawnTethered } from '@agentvisor/cli'
import { jetstream, jetstreamManager } from '@nats-io/jetstream'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { afterEach, describe, expect, it } from 'vitest'
import { startNatsServer } from './support/nats.js'
import { BIN, lastJson, runCli, startRunInBackground, tempDir, waitFor, writeTask } from './support/cli.js'

// The configuration docs/nats.md tells operators to use, exactly as shipped.
const CONFIG = fileURLToPath(new URL('../docs/nats-auth.conf', import.meta.url))

const stops: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop()
})

const stopProcess = async (child: ChildProcess): Promise<void> => {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((r) => child.once('exit', r))
  process.kill(child.pid, 'SIGTERM')
  await exited
}

/** A nats-server of this test's own on a free loopback port, with the shipped users and permissions. */
type Role = 'worker' | 'submitter' | 'supervisor' | 'observer'

const startServer = async (): Promise<{ url: string; passwords: Record<Role, string>; log: () => string }> => {
  // A letter first: nats-server parses a variable's value as a config value, and a hex string
  // such as `12e6f…` would read as a number (docs/nats.md).
  const password = () => `p${randomBytes(12).toString('hex')}`
  const passwords: Record<Role, string> = { worker: password(), submitter: password(), supervisor: password(), observer: password() }
  const server = await startNatsServer({
    args: ['-c', CONFIG],
    env: {
      AGENTVISOR_NATS_WORKER_PASS: passwords.worker,
      AGENTVISOR_NATS_SUBMITTER_PASS: passwords.submitter,
      AGENTVISOR_NATS_SUPERVISOR_PASS: passwords.supervisor,
      AGENTVISOR_NATS_OBSERVER_PASS: passwords.observer
    }
  })
  stops.push(server.stop)
  return { url: server.url, passwords, log: server.log }
}

const spawnChild = { name: 'spawn_child', arguments: { goal: 'Write part A', verify: { fileContains: { path: 'part.txt', text: 'A' } } } }
const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })

describe('the shipped NATS users and permissions (docs/nats-auth.conf)', () => {
  it('keep supervisors and anonymous clients off the start subject, let submitters only submit and observers only watch, while workers serve', async () => {
    const server = await startServer()
    const mock: MockLlm = await startMockLlm({
      scenarios: {
        models: {},
        goals: {
          'Split the work': [{ toolCalls: [spawnChild] }, write('out.txt', 'DONE')],
          'Write part A': [write('part.txt', 'A')],
          'Write the report': [write('report.txt', 'R'), { text: 'written' }]
        }
      } as never,
      port: 0
    })
    stops.push(() => mock.close())
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const asWorker = { AGENTVISOR_NATS_URL: server.url, AGENTVISOR_NATS_USER: 'worker', AGENTVISOR_NATS_PASS: server.passwords.worker }

    // A worker logged in as `worker` sets up the queue and serves, submitted runs too.
    const template = writeTask(
      dir,
      { goal: 'template', workspace: 'submitted', providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }], approval: 'auto' },
      'template.json'
    )
    const worker = spawnTethered(process.execPath, [BIN, 'worker', '--db', db, '--concurrency', '1', '--submit-template', template], {
      env: { ...process.env, ...asWorker },
      stdio: ['ignore', 'ignore', 'pipe'],
      watchesTether: true
    })
    let workerLog = ''
    worker.stderr!.on('data', (d: Buffer) => (workerLog += d.toString()))
    stops.push(() => stopProcess(worker))
    await waitFor(() => (workerLog.includes('serving') ? true : undefined), 'the worker serving')

    // Without a user, the server turns the connection away.
    await expect(connect({ servers: server.url, reconnect: false })).rejects.toThrow(/Authorization Violation/)

    // A supervisor may not publish on the start subject: the server refuses it.
    const supervisor: NatsConnection = await connect({ servers: server.url, user: 'supervisor', pass: server.passwords.supervisor })
    stops.push(() => supervisor.close())
    const forged = JSON.stringify({
      v: 1,
      runId: 'forged-by-supervisor',
      parentId: 'p',
      contract: { goal: 'g', workspace: dir, providers: [{ name: 'p', kind: 'scripted', steps: [] }] }
    })
    await expect(jetstream(supervisor).publish('agentvisor.runs.start', forged, { timeout: 60_000 })).rejects.toThrow(
      'Permissions Violation for Publish to "agentvisor.runs.start"'
    )
    // Nor reach the queue through the JetStream API.
    await expect(jetstreamManager(supervisor, { timeout: 60_000 }).then((jsm) => jsm.streams.purge('AGENTVISOR_RUNS'))).rejects.toThrow(/Permissions Violation/)
    await waitFor(
      () => (server.log().includes('Publish Violation - User "supervisor", Subject "agentvisor.runs.start"') ? true : undefined),
      "the server's record of it"
    )

    // A parent logged in as `worker` hands a real child to the queue; the worker drives it.
    const task = writeTask(dir, {
      goal: 'Split the work and write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      approval: 'auto'
    })
    const run = await runCli(['run', task, '--json', '--db', db], { env: asWorker })
    expect(run.code, run.stderr).toBe(0)
    const parentId = String(lastJson(run)['runId'])
    expect(lastJson(run)).toMatchObject({ status: 'succeeded' })
    expect(workerLog).toMatch(new RegExp(`run \\S+ started \\(child of ${parentId}\\)`))
    expect(readFileSync(path.join(dir, 'ws', 'children', '1', 'part.txt'), 'utf8')).toBe('A')
    expect(workerLog).not.toContain('forged-by-supervisor')
    expect(existsSync(path.join(dir, 'forged-by-supervisor'))).toBe(false)

    // What a supervisor may do: control requests, answered by the worker. Submitting is not among them.
    const as = async (role: Role) => {
      const client = await AgentvisorClient.connect({ servers: server.url, user: role, pass: server.passwords[role] })
      stops.push(() => client.close())
      return client
    }
    const supervising = await as('supervisor')
    expect(await supervising.status(parentId)).toMatchObject({ id: parentId, status: 'succeeded' })
    await expect(supervising.submit({ goal: 'Write the report' })).rejects.toThrow('Permissions Violation for Publish to "agentvisor.runs.submit"')

    // A submitter submits a root run, the worker drives it, and the submitter hears it done.
    const submitting = await as('submitter')
    const runId = randomUUID()
    const done = submitting.done(runId, 60_000)
    expect(await submitting.submit({ goal: 'Write the report' }, { runId })).toBe(runId)
    expect(await done).toMatchObject({ runId, status: 'succeeded' })
    expect(readFileSync(path.join(dir, 'submitted', 'report.txt'), 'utf8')).toBe('R')
    // It may neither control runs nor put a run on the start subject.
    await expect(submitting.cancel(runId)).rejects.toThrow(/Permissions Violation for Publish to "agentvisor.control/)
    const raw = await connect({ servers: server.url, user: 'submitter', pass: server.passwords.submitter })
    stops.push(() => raw.close())
    await expect(jetstream(raw).publish('agentvisor.runs.start', forged, { timeout: 60_000 })).rejects.toThrow(/Permissions Violation/)

    // An observer watches and can ask nothing.
    const observing = await as('observer')
    await expect(observing.status(runId)).rejects.toThrow(/Permissions Violation/)
    await expect(observing.submit({ goal: 'Write the report' })).rejects.toThrow(/Permissions Violation/)

    expect(await runCli(['runs', '--json', '--db', db]).then((r) => (JSON.parse(r.stdout) as unknown[]).length)).toBe(3)
    expect(server.log()).not.toMatch(/Violation - User "worker"/)
  })

  it('keep a worker to what a driver sends: it still cancels a child elsewhere and answers control, but may neither submit, nor ask any other control verb, nor touch the queue, nor answer into an inbox it was not asked from', async () => {
    const server = await startServer()
    const mock: MockLlm = await startMockLlm({
      scenarios: {
        models: {},
        goals: {
          'Split the work': [{ toolCalls: [{ name: 'spawn_child', arguments: { goal: 'Write the guide' } }] }],
          'Write the guide': [write('docs/guide.md', 'G')]
        }
      } as never,
      port: 0
    })
    stops.push(() => mock.close())
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const asWorker = { AGENTVISOR_NATS_URL: server.url, AGENTVISOR_NATS_USER: 'worker', AGENTVISOR_NATS_PASS: server.passwords.worker }
    const worker = spawnTethered(process.execPath, [BIN, 'worker', '--db', db, '--concurrency', '1'], {
      env: { ...process.env, ...asWorker },
      stdio: ['ignore', 'ignore', 'pipe'],
      watchesTether: true
    })
    let workerLog = ''
    worker.stderr!.on('data', (d: Buffer) => (workerLog += d.toString()))
    stops.push(() => stopProcess(worker))
    await waitFor(() => (workerLog.includes('serving') ? true : undefined), 'the worker serving')

    // A parent (logged in as `worker`) whose child, on the worker, pauses for an approval.
    const task = writeTask(dir, {
      goal: 'Split the work',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      policy: { layers: [{ name: 'team', ask: { write: ['docs/**'] } }] },
      approval: 'defer'
    })
    const parent = startRunInBackground(task, db, { ...process.env, ...asWorker })
    const parentId = await parent.runId()
    const store = new BetterSqlite3(db, { readonly: true })
    stops.push(async () => void store.close())
    const child = () => store.prepare('select id, status from runs where parent_id = ?').get(parentId) as { id: string; status: string } | undefined
    const paused = await waitFor(() => (child()?.status === 'awaiting_approval' ? child() : undefined), 'the child paused', 60_000)

    // A supervisor cancels the parent; the parent cancels its child on the bus, and the worker answers it.
    const supervising = await AgentvisorClient.connect({ servers: server.url, user: 'supervisor', pass: server.passwords.supervisor })
    stops.push(() => supervising.close())
    await supervising.cancel(parentId)
    expect(lastJson(await parent.done)).toMatchObject({ runId: parentId, status: 'cancelled' })
    await waitFor(() => (child()?.status === 'cancelled' ? true : undefined), 'the child cancelled')
    expect(workerLog).toContain(`run ${paused.id} started (resumed after a control request)`)
    expect(await supervising.status(paused.id)).toMatchObject({ id: paused.id, status: 'cancelled' })
    expect(server.log()).not.toMatch(/Violation - User "worker"/)

    // What a worker credential must not do, refused by the server.
    const raw = await connect({ servers: server.url, user: 'worker', pass: server.passwords.worker })
    stops.push(() => raw.close())
    const request = (subject: string) => raw.request(subject, JSON.stringify({ v: 1 }), { timeout: 60_000 })
    await expect(request('agentvisor.runs.submit')).rejects.toThrow('Permissions Violation for Publish to "agentvisor.runs.submit"')
    for (const verb of ['status', 'approve', 'answer', 'pending', 'tree']) {
      await expect(request(`agentvisor.control.${paused.id}.${verb}`)).rejects.toThrow(
        `Permissions Violation for Publish to "agentvisor.control.${paused.id}.${verb}"`
      )
    }
    await expect(jetstreamManager(raw, { timeout: 60_000 }).then((jsm) => jsm.streams.delete('AGENTVISOR_RUNS'))).rejects.toThrow(/Permissions Violation/)
    // A forged reply into someone else's inbox, and a look at every submission outside the workers' queue group.
    raw.publish('_INBOX.someone-else', JSON.stringify({ v: 1, ok: true, id: paused.id, status: 'succeeded' }))
    raw.subscribe('agentvisor.runs.submit')
    await raw.flush()
    await waitFor(
      () =>
        server.log().includes('Publish Violation - User "worker", Subject "_INBOX.someone-else"') &&
        server.log().includes('Subscription Violation - User "worker", Subject "agentvisor.runs.submit"')
          ? true
          : undefined,
      "the server's record of both"
    )
    expect(mock.requests).toHaveLength(2)
  })
})
