import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import { Agentvisor } from '@agentvisor/actors'
import type { MockLlm } from '@agentvisor/cli'
import { listChildren, openStore } from '@agentvisor/store'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { runCall } from './support/run-call.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const spawn = (goal: string) => ({ name: 'spawn_child', arguments: { goal, verify: { fileContains: { path: 'part.txt', text: goal.slice(-1) } } } })
const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })

/** A parent task on the mock's model `m`, done when out.txt says DONE. */
const parentTask = (dir: string, goal = 'Split the work and write DONE into out.txt', extra: Record<string, unknown> = {}) =>
  writeTask(dir, {
    goal,
    workspace: 'ws',
    providers: [{ name: 'p', kind: 'openai', baseUrl: mock!.url, model: 'm' }],
    verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
    approval: 'auto',
    ...extra
  })

interface Trace {
  run: { id: string; status: string; parentId: string | null }
  children: Array<{ id: string; status: string }>
}

describe('child runs from the TypeScript API', () => {
  it('spawns children of a running run from code, each with its own id, parent and folder', async () => {
    const dir = tempDir()
    const av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    try {
      const parent = await av.start({
        goal: 'coordinate',
        workspace: path.join(dir, 'ws'),
        approval: 'auto',
        providers: [{ name: 'p', kind: 'scripted', steps: [{ delayMs: 300, text: 'working on it' }] }]
      })
      const children = await Promise.all(['a', 'b'].map((part) => parent.spawn({ goal: `part ${part}`, limits: { maxSteps: 50 } })))
      const results = await Promise.all(children.map((c) => c.result))
      expect(results.map((r) => r.status)).toEqual(['succeeded', 'succeeded'])
      expect(new Set(children.map((c) => c.runId)).size).toBe(2)
      expect(existsSync(path.join(dir, 'ws', 'children', '1'))).toBe(true)
      expect(existsSync(path.join(dir, 'ws', 'children', '2'))).toBe(true)
      expect(await parent.result).toMatchObject({ status: 'succeeded' })
      const store = await openStore(path.join(dir, 'av.db'))
      try {
        const rows = await runCall(listChildren(store.db, parent.runId))
        expect(rows.map((r) => r.id).sort()).toEqual(children.map((c) => c.runId).sort())
        // Limits never exceed the parent's: the asked-for 50 steps became the parent's 10.
        expect(rows.map((r) => r.contract.limits.maxSteps)).toEqual([10, 10])
      } finally {
        await store.close()
      }
      await expect(parent.spawn({ goal: 'escape', workspace: '../out' })).rejects.toMatchObject({ _tag: 'ContractError' })
    } finally {
      await av.close()
    }
  })
})

describe('parent and child runs on the embedded in-process bus', () => {
  it('runs three children, each with its own id, parent and folder, and answers the parent in spawn order', async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [spawn('part A'), spawn('part B'), spawn('part C')] }, write('out.txt', 'DONE')] },
      goals: {
        'part A': [{ delayMs: 300, ...write('part.txt', 'A') }],
        'part B': [write('part.txt', 'B')],
        'part C': [{ delayMs: 150, ...write('part.txt', 'C') }]
      }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const file = parentTask(dir)
    const run = await runCli(['run', file, '--json', '--db', db])
    expect(run.code, run.stderr).toBe(0)
    const parentId = String(lastJson(run)['runId'])
    for (const [n, letter] of [
      [1, 'A'],
      [2, 'B'],
      [3, 'C']
    ] as const) {
      expect(readFileSync(path.join(dir, 'ws', 'children', String(n), 'part.txt'), 'utf8')).toBe(letter)
    }
    const trace = lastJson<Trace>(await runCli(['show', parentId, '--json', '--db', db]))
    expect(trace.children).toHaveLength(3)
    expect(trace.children.every((c) => c.status === 'succeeded')).toBe(true)
    expect(new Set(trace.children.map((c) => c.id)).size).toBe(3)
    const rows = lastJson<Array<{ id: string; parentId: string | null; goal: string }>>(await runCli(['runs', '--json', '--db', db]))
    expect(
      rows
        .filter((r) => r.parentId === parentId)
        .map((r) => r.goal)
        .sort()
    ).toEqual(['part A', 'part B', 'part C'])
    // The parent's model got the three results in the order it spawned them.
    const second = mock.requests.find((r) => JSON.stringify(r.body).includes('Child run'))!
    const tools = (second.body as { messages: Array<{ role: string; content: string }> }).messages.filter((m) => m.role === 'tool').map((m) => m.content)
    expect(tools).toHaveLength(3)
    const ids = trace.children.map((c) => c.id)
    for (const text of tools) expect(text).toMatch(/^Child run \S+ succeeded after 1 step/)
    const order = tools.map((text) => /^Child run (\S+)/.exec(text)![1])
    const goals = order.map((id) => rows.find((r) => r.id === id)!.goal)
    expect(goals).toEqual(['part A', 'part B', 'part C'])
    expect(ids.sort()).toEqual([...order].sort())
  })

  it('re-submits the children of a parent killed with them, and completes on resume', async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [spawn('part A'), spawn('part B')] }, write('out.txt', 'DONE')] },
      goals: { 'part A': [{ delayMs: 60_000, text: 'lost' }, write('part.txt', 'A')], 'part B': [write('part.txt', 'B')] }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const file = parentTask(dir)
    let pid = 0
    let parentId: string | undefined
    const first = runCli(['run', file, '--json', '--db', db], { onSpawn: (p) => (pid = p), onStderr: (t) => (parentId ??= /run (\S+) started/.exec(t)?.[1]) })
    // Child A's model call hangs while child B has finished: kill the whole process (parent and
    // in-process children). Waiting for B keeps its own model call out of the kill's way.
    await waitFor(async () => {
      if (parentId === undefined || mock!.requests.filter((r) => JSON.stringify(r.body).includes('part A')).length !== 1) return undefined
      const store = await openStore(db)
      try {
        const children = await runCall(listChildren(store.db, parentId))
        return children.some((c) => c.goal === 'part B' && c.status === 'succeeded') ? true : undefined
      } finally {
        await store.close()
      }
    }, 'child A in flight and child B done')
    process.kill(pid, 'SIGKILL')
    await first
    const resumed = await runCli(['resume', parentId!, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(readFileSync(path.join(dir, 'ws', 'children', '1', 'part.txt'), 'utf8')).toBe('A')
    expect(readFileSync(path.join(dir, 'ws', 'children', '2', 'part.txt'), 'utf8')).toBe('B')
  })

  const runParent = async (models: unknown[], goals: Record<string, unknown[]>, extra: Record<string, unknown>) => {
    mock = await startMock.scenarios({ models: { m: models }, goals })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const file = parentTask(dir, 'Split the work and write DONE into out.txt', extra)
    const run = await runCli(['run', file, '--json', '--db', db])
    const rows = lastJson<Array<{ id: string; parentId: string | null; goal: string; status: string; updatedAt: string }>>(
      await runCli(['runs', '--json', '--db', db])
    )
    return { run, dir, rows, parentId: String(lastJson(run)['runId']) }
  }

  it('refuses spawns past maxChildren and feeds the refusal back while the siblings complete', async () => {
    const { run, rows, parentId } = await runParent(
      [{ toolCalls: [spawn('part A'), spawn('part B'), spawn('part C')] }, write('out.txt', 'DONE')],
      { 'part A': [write('part.txt', 'A')], 'part B': [write('part.txt', 'B')] },
      { children: { maxChildren: 2 } }
    )
    expect(run.code, run.stderr).toBe(0)
    expect(rows.filter((r) => r.parentId === parentId).map((r) => r.status)).toEqual(['succeeded', 'succeeded'])
    const tools = (mock!.requests[3]!.body as { messages: Array<{ role: string; content: string }> }).messages.filter((m) => m.role === 'tool')
    expect(tools.map((m) => m.content.slice(0, 40))).toEqual([
      expect.stringMatching(/^Child run/),
      expect.stringMatching(/^Child run/),
      'Refused: this run may start at most 2 ch'
    ])
  })

  it('queues children past maxConcurrent instead of refusing them', async () => {
    const { run, rows, parentId } = await runParent(
      [{ toolCalls: [spawn('part A'), spawn('part B')] }, write('out.txt', 'DONE')],
      { 'part A': [{ delayMs: 400, ...write('part.txt', 'A') }], 'part B': [write('part.txt', 'B')] },
      { children: { maxConcurrent: 1 } }
    )
    expect(run.code, run.stderr).toBe(0)
    const children = rows.filter((r) => r.parentId === parentId)
    expect(children.map((r) => r.status)).toEqual(['succeeded', 'succeeded'])
    const a = children.find((c) => c.goal === 'part A')!
    const askedB = mock!.requests.find((r) => JSON.stringify(r.body).includes('part B'))!
    // B was not even asked for until A had finished.
    expect(Date.parse(askedB.at)).toBeGreaterThanOrEqual(Date.parse(a.updatedAt))
  })

  it('shares the dispatch ceiling across the tree and halts it when reached', async () => {
    const { run, parentId } = await runParent(
      [{ toolCalls: [spawn('part A'), spawn('part B')] }, write('out.txt', 'DONE')],
      { 'part A': [write('part.txt', 'A')], 'part B': [write('part.txt', 'B')] },
      { limits: { dispatchCeiling: 3 }, children: { maxConcurrent: 1 } }
    )
    expect(run.code).toBe(1)
    expect(lastJson(run)).toMatchObject({
      runId: parentId,
      status: 'failed',
      error: { kind: 'ceiling', message: 'dispatch ceiling of 3 exhausted by the run tree' }
    })
    expect(mock!.requests).toHaveLength(3)
  })

  it('refuses a child workspace outside the parent and feeds the refusal back', async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [{ name: 'spawn_child', arguments: { goal: 'escape', workspace: '../elsewhere' } }] }, write('out.txt', 'DONE')] }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const file = parentTask(dir, 'g')
    const run = await runCli(['run', file, '--json', '--db', db])
    expect(run.code, run.stderr).toBe(0)
    expect(existsSync(path.join(dir, 'elsewhere'))).toBe(false)
    expect(JSON.stringify(mock.requests[1]!.body)).toContain('Path escapes the workspace boundary: ../elsewhere')
    const trace = lastJson<Trace>(await runCli(['show', String(lastJson(run)['runId']), '--json', '--db', db]))
    expect(trace.children).toEqual([])
  })
})

describe('a parent that stops', () => {
  it('ends a child paused for approval when the parent times out, even with nobody serving control requests', async () => {
    mock = await startMock.scenarios({
      models: { m: [{ toolCalls: [{ name: 'spawn_child', arguments: { goal: 'part A' } }] }] },
      goals: { 'part A': [{ toolCalls: [{ name: 'exec', arguments: { command: 'echo hi > ran.txt' } }] }] }
    })
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    // No control handler in this process: the parent itself must end what it leaves behind.
    const av = await Agentvisor.open({ db, serveControl: false })
    let parentId: string
    try {
      const parent = await av.start({
        goal: 'Split the work',
        workspace: path.join(dir, 'ws'),
        providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
        approval: 'defer',
        limits: { timeoutMs: 3000 },
        policy: { layers: [{ name: 'team', ask: { exec: ['*'] } }] }
      })
      parentId = parent.runId
      expect(await parent.result).toMatchObject({ status: 'timed_out' })
    } finally {
      await av.close()
    }
    const store = await openStore(db)
    try {
      const children = await runCall(listChildren(store.db, parentId))
      expect(children.map((c) => c.status)).toEqual(['cancelled'])
    } finally {
      await store.close()
    }
    expect(existsSync(path.join(dir, 'ws', 'children', '1', 'ran.txt'))).toBe(false)
  })
})
