import { readFileSync } from 'node:fs'
import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { natsWorldPerTest } from './support/nats.js'
import type { Worker } from './support/workers.js'
import { processesMatching } from './support/processes.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const natsWorld = natsWorldPerTest()

const spawnChild = (goal: string) => ({ name: 'spawn_child', arguments: { goal, verify: { fileContains: { path: 'part.txt', text: goal.slice(-1) } } } })
const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })

const parentTask = (dir: string, url: string) =>
  writeTask(dir, {
    goal: 'Split the work and write DONE into out.txt',
    workspace: 'ws',
    providers: [{ name: 'p', kind: 'openai', baseUrl: url, model: 'm' }],
    verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
    approval: 'auto'
  })

describe('child runs over NATS on worker processes', () => {
  it('runs three children on two workers; results come back in spawn order and both workers work', async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [spawnChild('part A'), spawnChild('part B'), spawnChild('part C')] }, write('out.txt', 'DONE')] },
      goals: {
        'part A': [{ delayMs: 800, ...write('part.txt', 'A') }],
        'part B': [{ delayMs: 800, ...write('part.txt', 'B') }],
        'part C': [{ delayMs: 800, ...write('part.txt', 'C') }]
      }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const [w1, w2] = (await world.serving(db, 2)) as [Worker, Worker]
    const run = await runCli(['run', parentTask(dir, mock.url), '--json', '--db', db], { env })
    expect(run.code, run.stderr).toBe(0)
    const parentId = String(lastJson(run)['runId'])
    const rows = lastJson<Array<{ id: string; parentId: string | null; goal: string; status: string }>>(await runCli(['runs', '--json', '--db', db]))
    const children = rows.filter((r) => r.parentId === parentId)
    expect(children.map((c) => c.status)).toEqual(['succeeded', 'succeeded', 'succeeded'])
    for (const [n, letter] of [
      [1, 'A'],
      [2, 'B'],
      [3, 'C']
    ] as const) {
      expect(readFileSync(path.join(dir, 'ws', 'children', String(n), 'part.txt'), 'utf8')).toBe(letter)
    }
    for (const worker of [w1, w2]) expect(worker.log()).toMatch(/run \S+ started \(child of /)
    const logs = w1.log() + w2.log()
    for (const child of children) {
      expect(logs).toContain(`run ${child.id} started`)
      expect(logs).toContain(`run ${child.id} succeeded`)
    }
    const second = mock.requests.find((r) => JSON.stringify(r.body).includes('Child run'))!
    const order = (second.body as { messages: Array<{ role: string; content: string }> }).messages
      .filter((m) => m.role === 'tool')
      .map((m) => children.find((c) => m.content.includes(c.id))!.goal)
    expect(order).toEqual(['part A', 'part B', 'part C'])
  })

  it('finishes a child on another worker when the one driving it is killed', async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [spawnChild('part A')] }, write('out.txt', 'DONE')] },
      goals: { 'part A': [{ delayMs: 60_000, text: 'lost' }, write('part.txt', 'A')] }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const [w1] = (await world.serving(db, 1)) as [Worker]
    const parent = runCli(['run', parentTask(dir, mock.url), '--json', '--db', db], { env })
    await waitFor(() => (/run \S+ started \(child of/.test(w1.log()) && mock!.requests.length >= 2 ? true : undefined), 'the child on the first worker')
    w1.child.kill('SIGKILL')
    const w2 = world.worker(db)
    const result = await parent
    expect(result.code, result.stderr).toBe(0)
    expect(w2.log()).toMatch(/run \S+ started \(child of \S+, delivery 2\)/)
    expect(readFileSync(path.join(dir, 'ws', 'children', '1', 'part.txt'), 'utf8')).toBe('A')
  })

  it('resumes a parent killed while its children run, re-attaching to them', async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [spawnChild('part A'), spawnChild('part B')] }, write('out.txt', 'DONE')] },
      goals: { 'part A': [{ delayMs: 1500, ...write('part.txt', 'A') }], 'part B': [{ delayMs: 300, ...write('part.txt', 'B') }] }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    const [w1] = (await world.serving(db, 1)) as [Worker]
    let parentId: string | undefined
    let pid = 0
    const parent = runCli(['run', parentTask(dir, mock.url), '--json', '--db', db], {
      env,
      onSpawn: (p) => (pid = p),
      onStderr: (t) => (parentId ??= /run (\S+) started/.exec(t)?.[1])
    })
    await waitFor(() => (/run \S+ started \(child of/.test(w1.log()) ? true : undefined), 'a child on the worker')
    process.kill(pid, 'SIGKILL')
    await parent
    const resumed = await runCli(['resume', parentId!, '--json', '--db', db], { env })
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toMatchObject({ runId: parentId, status: 'succeeded' })
    const rows = lastJson<Array<{ parentId: string | null; status: string }>>(await runCli(['runs', '--json', '--db', db]))
    expect(rows.filter((r) => r.parentId === parentId).map((r) => r.status)).toEqual(['succeeded', 'succeeded'])
  })

  it('cancels every child with the parent, leaving no tool process behind', async () => {
    const marker = '41.0443'
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [spawnChild('part A'), spawnChild('part B')] }] },
      goals: {
        'part A': [{ toolCalls: [{ name: 'exec', arguments: { command: `sleep ${marker}` } }] }],
        'part B': [{ toolCalls: [{ name: 'exec', arguments: { command: `sleep ${marker}` } }] }]
      }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const env = world.env
    await world.serving(db, 2)
    let parentId: string | undefined
    const parent = runCli(['run', parentTask(dir, mock.url), '--json', '--db', db], { env, onStderr: (t) => (parentId ??= /run (\S+) started/.exec(t)?.[1]) })
    await waitFor(() => (processesMatching(`sleep ${marker}`).length >= 2 ? true : undefined), 'both children in their exec')
    const cancel = await runCli(['cancel', parentId!, '--db', db], { env })
    expect(cancel.code, cancel.stderr).toBe(0)
    expect(lastJson(await parent)).toMatchObject({ status: 'cancelled' })
    await waitFor(async () => {
      const rows = lastJson<Array<{ parentId: string | null; status: string }>>(await runCli(['runs', '--json', '--db', db]))
      const statuses = rows.filter((r) => r.parentId === parentId).map((r) => r.status)
      return statuses.length === 2 && statuses.every((s) => s === 'cancelled') ? true : undefined
    }, 'both children cancelled')
    expect(processesMatching(`sleep ${marker}`)).toEqual([])
  })
})
