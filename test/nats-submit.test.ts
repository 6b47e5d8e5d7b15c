import { randomUUID } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { AgentvisorClient, ControlRefusedError, natsBusOptionsFromEnv } from '@agentvisor/actors'
import type { MockLlm } from '@agentvisor/cli'
// Only the plain NATS client: what a service in any language does (docs/nats.md).
import type { NatsConnection } from '@nats-io/transport-node'
import { afterEach, describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { natsWorldPerTest } from './support/nats.js'
import { serving } from './support/workers.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined
let nc: NatsConnection | undefined
let client: AgentvisorClient | undefined
afterEach(async () => {
  await client?.close()
  client = undefined
  // The world closes its connections itself.
  nc = undefined
})

const natsWorld = natsWorldPerTest()
const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })
const decode = (data: Uint8Array) => JSON.parse(new TextDecoder().decode(data)) as Record<string, unknown>
const encode = (value: unknown) => new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value))

/** A team's submit template: the provider, the policy and the limits every submitted run gets at most. */
const template = (dir: string, baseUrl: string): string =>
  writeTask(
    dir,
    {
      goal: 'Replaced by each submission',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl, model: 'm' }],
      policy: { layers: [{ name: 'team', allow: { write: ['reports/**'] } }] },
      limits: { maxSteps: 5 }
    },
    'template.json'
  )

const runsIn = async (db: string): Promise<Array<{ id: string; status: string }>> => {
  const listed = await runCli(['runs', '--json', '--db', db])
  return listed.stdout.trim() === '' ? [] : (JSON.parse(listed.stdout) as Array<{ id: string; status: string }>)
}

describe('a root run submitted over NATS', () => {
  it('is stored and queued, driven by a worker, announced, streamed and done, with its trace in the store like any run', async () => {
    mock = await startMock.scenarios({ goals: { 'Write the weekly report': [write('reports/weekly.txt', 'R'), { text: 'written' }] } })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const prefix = env['AGENTVISOR_NATS_PREFIX']!
    const worker = world.worker(db, ['--submit-template', template(dir, mock.url)])
    await serving([worker])
    nc = await world.connect()
    const runId = randomUUID()
    const heard: Record<string, unknown[]> = { started: [], stream: [], done: [] }
    for (const kind of ['started', 'stream', 'done'] as const)
      nc.subscribe(`${prefix}.runs.${runId}.${kind}`, {
        callback: (_error, msg) => {
          heard[kind]!.push(decode(msg.data))
        }
      })
    await nc.flush()

    const submission = {
      v: 1,
      runId,
      contract: { goal: 'Write the weekly report', workspace: 'team-a', verify: { fileContains: { path: 'reports/weekly.txt', text: 'R' } } }
    }
    const reply = decode((await nc.request(`${prefix}.runs.submit`, encode(submission), { timeout: 60_000 })).data)
    expect(reply).toEqual({ v: 1, ok: true, runId })

    const done = await waitFor(() => heard['done']![0] as Record<string, unknown> | undefined, 'the done message')
    expect(done).toMatchObject({ v: 1, runId, status: 'succeeded', steps: 1 })
    expect(heard['started']).toEqual([{ v: 1, runId, parentId: null, rootId: runId, goal: 'Write the weekly report', agent: null, resumed: false }])
    // The stream is read from the store after each transition: its events may come after the done message.
    await waitFor(() => ((heard['stream'] as Array<{ kind: string }>).some((event) => event.kind === 'done') ? true : undefined), 'the stream to its end')
    const kinds = (heard['stream'] as Array<{ kind: string }>).map((event) => event.kind)
    expect(kinds).toEqual(expect.arrayContaining(['transition', 'attempt', 'toolCall', 'toolResult', 'done']))
    expect(readFileSync(path.join(dir, 'ws', 'team-a', 'reports', 'weekly.txt'), 'utf8')).toBe('R')

    const shown = lastJson<{ run: { id: string; status: string; parentId: string | null }; transitions: unknown[]; receipts: unknown[] }>(
      await runCli(['show', runId, '--json', '--db', db])
    )
    expect(shown.run).toMatchObject({ id: runId, status: 'succeeded', parentId: null })
    expect(shown.transitions.length).toBeGreaterThanOrEqual(3)
    expect(shown.receipts).toHaveLength(1)
    expect(worker.log()).toContain(`queued submitted run ${runId}`)
    expect(worker.log()).toContain(`run ${runId} started (submitted)`)
    expect(worker.log()).toContain(`run ${runId} succeeded`)
  })

  it('is refused, naming the field, when malformed or wider than the template, and nothing of it runs', async () => {
    mock = await startMock([{ text: 'never asked' }])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const prefix = env['AGENTVISOR_NATS_PREFIX']!
    const worker = world.worker(db, ['--submit-template', template(dir, mock.url)])
    await serving([worker])
    nc = await world.connect()
    const submit = async (payload: unknown) => decode((await nc!.request(`${prefix}.runs.submit`, encode(payload), { timeout: 60_000 })).data)
    const goal = 'Write the weekly report'

    expect(await submit('{not json')).toEqual({ v: 1, ok: false, error: 'payload is not JSON' })
    expect(await submit({ v: 1, contract: { goal }, priority: 'high' })).toEqual({ v: 1, ok: false, error: 'priority: is not a known field' })
    expect(await submit({ v: 2, contract: { goal } })).toMatchObject({ v: 1, ok: false, error: expect.stringMatching(/^v: /) })
    expect(await submit({ v: 1, contract: { goal }, runId: '../etc' })).toMatchObject({ ok: false, error: expect.stringMatching(/^runId: /) })
    expect(await submit({ v: 1, contract: { goal, limits: { maxSteps: 'many' } } })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^limits\.maxSteps/)
    })
    expect(await submit({ v: 1, contract: { goal, workspace: '../../elsewhere' } })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^workspace: .* is not inside/)
    })
    expect(await submit({ v: 1, contract: { goal, limits: { maxSteps: 50 } } })).toMatchObject({
      ok: false,
      error: "limits.maxSteps: 50 is above the worker's submit template's 5"
    })
    expect(await submit({ v: 1, contract: { goal, policy: { layers: [{ name: 'mine', allow: { write: ['**'] } }] } } })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^policy\.layers\.0\.allow: /)
    })
    expect(await submit({ v: 1, contract: { goal, approval: 'auto' } })).toMatchObject({ ok: false, error: expect.stringMatching(/^approval: /) })
    expect(
      await submit({ v: 1, contract: { goal, providers: [{ name: 'x', kind: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'big' }] } })
    ).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^providers: /)
    })
    expect(await submit({ v: 1, contract: { goal, lineage: { rootId: 'r', parentId: 'r', depth: 1, treeDispatchCeiling: 9 } } })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^lineage: is set by agentvisor/)
    })
    // A root run put straight on the start subject, without the row only a submission writes, is refused too.
    const contract = { goal, workspace: path.join(dir, 'ws'), providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }] }
    nc.publish(`${prefix}.runs.start`, encode({ v: 1, runId: 'sneaked-root', parentId: null, contract }))
    await waitFor(() => (worker.log().includes('refused run sneaked-root: a root run is taken on the submit subject') ? true : undefined), 'the refusal logged')

    // Requests on the start subject that are no child-run request at all are dropped, and said.
    nc.publish(`${prefix}.runs.start`, encode('{not json'))
    nc.publish(`${prefix}.runs.start`, encode({ v: 1, runId: 'odd-parent', parentId: 5, contract }))
    await waitFor(() => (worker.log().includes('refused a child-run request: run odd-parent: parentId: must be') ? true : undefined), 'the refusal logged')

    expect(await runsIn(db)).toEqual([])
    expect(mock.requests).toHaveLength(0)
    expect(existsSync(path.join(dir, 'elsewhere'))).toBe(false)
    // Every refusal is a line of the worker's log, its reason as the reply gave it.
    for (const reason of [
      'payload is not JSON',
      'priority: is not a known field',
      'runId: ',
      'limits.maxSteps',
      'workspace: ',
      "limits.maxSteps: 50 is above the worker's submit template's 5",
      'policy.layers.0.allow: ',
      'approval: ',
      'providers: ',
      'lineage: is set by agentvisor'
    ]) {
      expect(worker.log()).toContain(`refused a submitted run: ${reason}`)
    }
    expect(worker.log()).toContain('refused a child-run request: the payload is not a JSON object')
  })

  it('answers every one of identical submissions in flight at once as the first, creates and drives the run once, and refuses another task under its id in plain words', async () => {
    // Each run's conversation plays the script from its start (`replay: turn`).
    mock = await startMock.scenarios({ replay: 'turn', goals: { 'Write the weekly report': [write('reports/weekly.txt', 'R'), { text: 'written' }] } })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const prefix = env['AGENTVISOR_NATS_PREFIX']!
    // Two workers on one SQLite file: the submissions race within each and between the two.
    const args = ['--submit-template', template(dir, mock.url)]
    const workers = [world.worker(db, args), world.worker(db, args)]
    await serving(workers)
    nc = await world.connect()
    const done = new Map<string, Record<string, unknown>>()
    nc.subscribe(`${prefix}.runs.*.done`, {
      callback: (_error, msg) => {
        const message = decode(msg.data)
        done.set(String(message['runId']), message)
      }
    })
    await nc.flush()
    const submit = async (payload: unknown) => decode((await nc!.request(`${prefix}.runs.submit`, encode(payload), { timeout: 60_000 })).data)

    const rounds = Array.from({ length: 4 }, () => randomUUID())
    for (const runId of rounds) {
      const submission = { v: 1, runId, contract: { goal: 'Write the weekly report', workspace: runId } }
      const replies = await Promise.all(Array.from({ length: 6 }, () => submit(submission)))
      expect(replies).toEqual(Array.from({ length: 6 }, () => ({ v: 1, ok: true, runId })))
    }
    await waitFor(() => (rounds.every((runId) => done.has(runId)) ? true : undefined), 'every run done', 60_000)
    for (const runId of rounds) {
      expect(done.get(runId)).toMatchObject({ runId, status: 'succeeded', steps: 2 })
      expect(readFileSync(path.join(dir, 'ws', runId, 'reports', 'weekly.txt'), 'utf8')).toBe('R')
    }

    // Another task under a taken id, even at once with the very same one, is refused in plain words.
    const [same, other] = await Promise.all([
      submit({ v: 1, runId: rounds[0], contract: { goal: 'Write the weekly report', workspace: rounds[0] } }),
      submit({ v: 1, runId: rounds[0], contract: { goal: 'Something else' } })
    ])
    expect(same).toEqual({ v: 1, ok: true, runId: rounds[0] })
    expect(other).toEqual({
      v: 1,
      ok: false,
      error: `runId: run ${rounds[0]} exists already (submit a new id, or the very same task to be told it was taken)`
    })

    // One row per run, each driven once: the model was asked once per step of each.
    expect((await runsIn(db)).map((run) => run.id).sort()).toEqual([...rounds].sort())
    expect(mock.requests).toHaveLength(2 * rounds.length)
    const logs = workers.map((w) => w.log()).join('')
    for (const runId of rounds) {
      expect(logs.split(`queued submitted run ${runId}`)).toHaveLength(2)
      expect(logs.split(`run ${runId} started`)).toHaveLength(2)
    }
    expect(logs).not.toMatch(/UNIQUE|constraint/i)
  })

  it('says a store that fails under a submission or a control request in no reply, and logs its cause', async () => {
    mock = await startMock([{ text: 'never asked' }])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const prefix = env['AGENTVISOR_NATS_PREFIX']!
    const worker = world.worker(db, ['--submit-template', template(dir, mock.url)])
    await serving([worker])
    // The store fails behind the worker's back: the tables it reads and writes are gone.
    const sqlite = new BetterSqlite3(db)
    sqlite.pragma('foreign_keys = OFF')
    sqlite.exec('drop table run_contracts; drop table runs')
    sqlite.close()
    nc = await world.connect()
    const ask = async (subject: string, payload: unknown) => decode((await nc!.request(subject, encode(payload), { timeout: 60_000 })).data)

    const runId = randomUUID()
    const submitted = await ask(`${prefix}.runs.submit`, { v: 1, runId, contract: { goal: 'Write the weekly report' } })
    expect(submitted).toEqual({
      v: 1,
      ok: false,
      error: 'cannot take the submitted run: the store failed (the cause is in the log of the process that answered)'
    })
    for (const verb of ['status', 'tree', 'pending', 'cancel'] as const) {
      const reply = await ask(`${prefix}.control.${runId}.${verb}`, { v: 1 })
      expect(reply).toEqual({
        v: 1,
        ok: false,
        error: `cannot ${verb === 'pending' ? 'list the requests of' : verb} run ${runId}: the store failed (the cause is in the log of the process that answered)`
      })
    }
    // The operator reads the cause, once per request.
    expect(worker.log()).toContain('cannot take the submitted run: ')
    expect(worker.log()).toMatch(/no such table: run/)
    expect(mock.requests).toHaveLength(0)
  })

  it('through the TypeScript client: taken once under one id, refused under a taken id, and said plainly when no worker takes submissions', async () => {
    mock = await startMock.scenarios({ goals: { 'Write the weekly report': [write('reports/weekly.txt', 'R'), { text: 'written' }] } })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    // The same connection options as the workers': this test's server, prefix, stream and consumer.
    client = await AgentvisorClient.connect(natsBusOptionsFromEnv({}, env)!)
    const task = { goal: 'Write the weekly report' }

    // A worker without a template takes no submissions: the client is told so, in one line.
    const plain = world.worker(db)
    await serving([plain])
    const refused = await client.submit(task).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(Error)
    expect((refused as Error).message).toBe('no worker takes submitted runs: start one with --submit-template FILE (docs/nats.md, "Submitting runs")')

    await serving([world.worker(db, ['--submit-template', template(dir, mock.url)])])
    const runId = randomUUID()
    const done = client.done(runId, 60_000)
    expect(await client.submit(task, { runId })).toBe(runId)
    // A client that lost the reply sends the same again: the same run, taken once.
    expect(await client.submit(task, { runId })).toBe(runId)
    expect(await done).toMatchObject({ runId, status: 'succeeded' })
    const other = await client.submit({ goal: 'Something else' }, { runId }).catch((error: unknown) => error)
    expect(other).toBeInstanceOf(ControlRefusedError)
    expect((other as Error).message).toMatch(/^runId: run .* exists already/)

    expect(await runsIn(db)).toEqual([expect.objectContaining({ id: runId, status: 'succeeded' })])
    expect(mock.requests).toHaveLength(2)
  })
})
