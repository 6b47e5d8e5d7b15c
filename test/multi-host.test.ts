import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { jetstreamManager } from '@nats-io/jetstream'
import { Agentvisor, type ChildDelivery, childRunRow, handleChildDelivery, makeLeaseOwner, PROTOCOL_VERSION } from '@agentvisor/actors'
import { spawnTethered, type MockLlm } from '@agentvisor/cli'
import { insertRun, openStore } from '@agentvisor/store'
import { Effect } from 'effect'
import { afterEach, describe, expect, it, onTestFinished } from 'vitest'
import { BIN, type CliResult, lastJson, mockTask, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { type Hosts, makeHosts } from './support/hosts.js'
import { freshDatabase, gaplessTransitions, type TestDatabase } from './support/pg.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { natsWorldPerTest } from './support/nats.js'
import { runCall } from './support/run-call.js'

const startMock = mockLlmPerTest()
const natsWorld = natsWorldPerTest()
let mock: MockLlm | undefined
const processes: ChildProcess[] = []
let hosts: Hosts | undefined
afterEach(async () => {
  for (const child of processes.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGKILL')
      await exited
    }
  }
  await hosts?.close()
  hosts = undefined
})

interface Worker {
  readonly child: ChildProcess
  readonly pid: number
  readonly log: () => string
}

/** `agentvisor worker --nats URL --db postgres://...` on simulated host `index` (see support/hosts.ts). */
const startWorker = (index: number, nats: string, db: string, env: Record<string, string>): Worker => {
  const [command, args] = hosts!.command(index, [process.execPath, BIN, 'worker', '--nats', nats, '--db', db, '--concurrency', '2'])
  // `ip netns exec` execs the worker, which watches the tether itself: it ends with the test process.
  const child = spawnTethered(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'], watchesTether: true })
  processes.push(child)
  let log = ''
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()))
  return { child, pid: child.pid!, log: () => log }
}

const exec = (command: string) => ({ name: 'exec', arguments: { command } })
/** Waits for the test's go-ahead (a file `go`), 60 s at most: a failed test leaves no shell looping behind. */
const untilGo = 'for i in $(seq 1200); do [ -f go ] && break; sleep 0.05; done'
const write = (p: string, content: string) => ({ name: 'write_file', arguments: { path: p, content } })
const spawnChild = (letter: string) => ({
  name: 'spawn_child',
  arguments: { goal: `Write part ${letter} into part.txt`, verify: { fileContains: { path: 'part.txt', text: letter } } }
})
/** A child's work: one exec whose every run appends a line (the side effect to count), one write. */
const childWork = (letter: string, extra = '') => [exec(`echo ${letter} >> effects.txt${extra}`), write('part.txt', letter)]

interface RunRow {
  id: string
  goal: string
  status: string
  lease_owner: string | null
  token: number
}
const runsOf = (db: TestDatabase) => db.query<RunRow>('select id, goal, status, lease_owner, lease_token::int as token from runs order by goal')

describe('workers on many hosts sharing one PostgreSQL and one NATS', () => {
  it('finishes every child exactly once when a worker is SIGKILLed mid-run: the other takes its child over', async () => {
    const letters = ['A', 'B', 'C', 'D']
    // Each worker on a host of its own: it reaches NATS, PostgreSQL and the model only over its
    // network link, the way a worker on another machine would.
    hosts = await makeHosts(2)
    // Child A's first model call never answers: whoever drives it is mid-dispatch until killed.
    // Its second call (by the worker that takes it over) waits for the test's go-ahead in its exec.
    mock = await startMock.scenarios(
      {
        models: { m: [{ toolCalls: letters.map(spawnChild) }, { toolCalls: [write('out.txt', 'DONE')] }] },
        goals: {
          'part A': [{ delayMs: 60_000, text: 'lost' }, { toolCalls: childWork('A', `; ${untilGo}`) }],
          'part B': [{ delayMs: 2000, toolCalls: childWork('B') }],
          'part C': [{ delayMs: 2000, toolCalls: childWork('C') }],
          'part D': [{ delayMs: 2000, toolCalls: childWork('D') }]
        }
      },
      { host: hosts.address }
    )
    const dir = tempDir('agentvisor-hosts-')
    const task = writeTask(
      dir,
      mockTask(mock.url, { goal: 'Split the work in four parts and write DONE into out.txt', limits: { maxSteps: 4, timeoutMs: 60_000 } })
    )
    const db = await freshDatabase()
    const world = natsWorld()
    // The world's subjects, stream and consumer; the server is each process's --nats (a worker's
    // is across its network link). The ack wait shorter than B, C and D take: their workers keep
    // them in progress.
    const env: Record<string, string> = { ...world.env, AGENTVISOR_NATS_ACK_WAIT_MS: '1500', AGENTVISOR_DB: '' }
    delete env['AGENTVISOR_NATS_URL']
    const nats = new URL(world.url)
    const remoteNats = `nats://${hosts.address}:${await hosts.expose(Number(nats.port))}`
    const remoteDb = new URL(db.url)
    remoteDb.hostname = hosts.address
    remoteDb.port = String(await hosts.expose(Number(new URL(db.url).port)))
    const workers = [0, 1].map((i) => startWorker(i, remoteNats, remoteDb.toString(), env))
    await waitFor(() => (workers.every((w) => w.log().includes('serving')) ? true : undefined), 'both workers serving')
    if (hosts.isolated) {
      // Two network stacks, neither this process's: the workers share no loopback with anyone.
      const stacks = [process.pid, ...workers.map((w) => w.pid)].map((pid) => readlinkSync(`/proc/${pid}/ns/net`))
      expect(new Set(stacks).size).toBe(3)
    }

    const parent = runCli(['run', task, '--json', '--nats', world.url, '--db', db.url], { cwd: dir, env })

    // The moment to kill: B, C and D are done, and A is mid-dispatch on one worker (its receipt
    // pending, its lease held by that worker's process, its call at the model).
    const victim = await waitFor(async () => {
      const rows = await runsOf(db)
      const children = rows.filter((r) => r.goal.startsWith('Write part'))
      if (children.length !== 4 || !children.slice(1).every((r) => r.status === 'succeeded')) return undefined
      const a = children[0]!
      const pending = await db.query('select 1 from attempts where run_id = $1 and outcome = $2', [a.id, 'pending'])
      const called = mock!.requests.some((r) => JSON.stringify(r.body).includes('part A'))
      const owner = workers.find((w) => a.lease_owner?.includes(`/${w.pid}/`))
      // Its log too has caught up: each sibling it drove is logged as ended.
      const logged =
        owner !== undefined && children.slice(1).every((c) => !owner.log().includes(`run ${c.id} started`) || owner.log().includes(`run ${c.id} succeeded`))
      return pending.length === 1 && called && logged ? { worker: owner, runId: a.id } : undefined
    }, 'child A mid-dispatch on a worker, its siblings done')
    const survivor = workers.find((w) => w !== victim.worker)!
    const killed = new Promise((r) => victim.worker.child.once('exit', r))
    victim.worker.child.kill('SIGKILL')
    await killed

    // The survivor gets A's message again once its ack deadline passes, and takes the lease over.
    await waitFor(async () => {
      const [a] = await db.query<{ lease_owner: string | null }>('select lease_owner from runs where id = $1', [victim.runId])
      const effects = await db.query('select 1 from tool_effects where run_id = $1 and name = $2', [victim.runId, 'exec'])
      return a?.lease_owner?.includes(`/${survivor.pid}/`) === true && effects.length === 1 ? true : undefined
    }, 'the surviving worker driving child A')
    writeFileSync(path.join(dir, 'ws', 'children', '1', 'go'), '')

    const result = await parent
    expect(result.code, result.stderr).toBe(0)
    const parentId = lastJson<{ runId: string; status: string }>(result).runId
    expect(lastJson(result)).toMatchObject({ status: 'succeeded' })

    const rows = await runsOf(db)
    const children = rows.filter((r) => r.goal.startsWith('Write part'))
    expect(children.map((c) => [c.goal, c.status, c.lease_owner])).toEqual(letters.map((l) => [`Write part ${l} into part.txt`, 'succeeded', null]))
    // One acquisition per child, two for A (its first worker's and the survivor's): no third driver.
    expect(children.map((c) => c.token)).toEqual([2, 1, 1, 1])
    for (const [i, letter] of letters.entries()) {
      const ws = path.join(dir, 'ws', 'children', String(i + 1))
      expect(readFileSync(path.join(ws, 'part.txt'), 'utf8')).toBe(letter)
      // The exec ran once: its side effect happened exactly once.
      expect(readFileSync(path.join(ws, 'effects.txt'), 'utf8')).toBe(`${letter}\n`)
    }
    for (const child of children) {
      expect(await db.query('select name, status from tool_effects where run_id = $1 order by position', [child.id])).toEqual([
        { name: 'exec', status: 'completed' },
        { name: 'write_file', status: 'completed' }
      ])
      expect(await db.query('select count(*)::int as n from transitions where run_id = $1 and to_state = $2', [child.id, 'finished.succeeded'])).toEqual([
        { n: 1 }
      ])
    }
    // A's lost dispatch is on record as unknown; the survivor's is the one that answered.
    expect(await db.query('select attempt, outcome from attempts where run_id = $1 order by step, attempt', [victim.runId])).toEqual([
      { attempt: 0, outcome: 'unknown' },
      { attempt: 1, outcome: 'ok' }
    ])
    const counts = await gaplessTransitions(db)
    expect([...counts.keys()].sort()).toEqual([parentId, ...children.map((c) => c.id)].sort())

    // Four requests, delivered five times: once each, and A's once more after its worker died.
    // B, C and D took longer than the ack wait, but their workers kept them in progress.
    const consumers = (await jetstreamManager(await world.connect())).consumers
    const info = await waitFor(async () => {
      const now = await consumers.info(env['AGENTVISOR_NATS_STREAM']!, env['AGENTVISOR_NATS_CONSUMER']!)
      return now.num_ack_pending === 0 ? now : undefined
    }, 'every request acked')
    expect(info.delivered.consumer_seq).toBe(5)
    expect(info.num_pending).toBe(0)

    // The logs tell the same story: A started on the victim and never ended there; the survivor
    // got A's message redelivered and finished it; every child ended exactly once.
    expect(victim.worker.log()).toContain(`run ${victim.runId} started (child of ${parentId}`)
    expect(survivor.log()).toMatch(new RegExp(`run ${victim.runId} started \\(child of ${parentId}, delivery [2-9]\\d*\\)`))
    const logs = victim.worker.log() + survivor.log()
    for (const child of children) expect(logs.match(new RegExp(`run ${child.id} succeeded`, 'g'))).toHaveLength(1)
  })
})

const RACER = fileURLToPath(new URL('./support/resume-racer.mjs', import.meta.url))

/**
 * A run interrupted mid-dispatch by a SIGKILL, on a fresh database. Whoever resumes it next
 * dispatches again and then blocks in an exec until the test creates `ws/go`.
 */
const interruptedRun = async () => {
  mock = await startMock.scenarios({
    models: {
      m: [{ delayMs: 60_000, text: 'lost' }, { toolCalls: [exec(`echo ran >> effects.txt; ${untilGo}`)] }, { toolCalls: [write('out.txt', 'DONE')] }]
    }
  })
  const dir = tempDir('agentvisor-race-')
  const task = writeTask(dir, mockTask(mock.url))
  const db = await freshDatabase()
  let pid = 0
  let announced: string | undefined
  const first = runCli(['run', task, '--json', '--db', db.url], {
    cwd: dir,
    env: { AGENTVISOR_DB: '' },
    onSpawn: (p) => (pid = p),
    onStderr: (text) => (announced ??= /run (\S+) started/.exec(text)?.[1])
  })
  const runId = await waitFor(() => announced, 'the run id')
  await waitFor(
    async () =>
      (await db.query('select 1 from attempts where run_id = $1 and outcome = $2', [runId, 'pending'])).length === 1 && mock!.requests.length === 1
        ? true
        : undefined,
    'the pending dispatch'
  )
  process.kill(pid, 'SIGKILL')
  await first
  return { dir, ws: path.join(dir, 'ws'), db, runId }
}

/** After the race: the winner's run finished once, with one more acquisition than before and gapless transitions. */
const expectDrivenOnce = async (db: TestDatabase, ws: string, runId: string) => {
  expect(await db.query('select status, lease_owner, lease_token::int as token from runs')).toEqual([{ status: 'succeeded', lease_owner: null, token: 2 }])
  expect(readFileSync(path.join(ws, 'effects.txt'), 'utf8')).toBe('ran\n')
  expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE')
  expect(await db.query('select attempt, outcome from attempts where run_id = $1 order by step, attempt', [runId])).toEqual([
    { attempt: 0, outcome: 'unknown' },
    { attempt: 1, outcome: 'ok' },
    { attempt: 0, outcome: 'ok' }
  ])
  // DISPATCH_LOST, the exec step (its verification fails: no out.txt yet), the write step: one
  // driver's history, no gap, no repeat.
  expect(await gaplessTransitions(db)).toEqual(new Map([[runId, 7]]))
  expect(mock!.requests).toHaveLength(3)
}

describe('one driver per run on PostgreSQL, under a race', () => {
  it('lets exactly one of several `agentvisor resume` processes drive an interrupted run; the others exit 2 with one line', async () => {
    const { dir, ws, db, runId } = await interruptedRun()
    const contenders = 3
    let winner: Promise<CliResult> | undefined
    const losers: CliResult[] = []
    const all = Array.from({ length: contenders }, () => runCli(['resume', runId, '--json', '--db', db.url], { cwd: dir, env: { AGENTVISOR_DB: '' } }))
    // The winner blocks in its exec until `go` exists, so every other contender finds it holding the lease.
    for (const contender of all) {
      void contender.then((r) => {
        if (r.code === 2) losers.push(r)
        else winner = contender
      })
    }
    await waitFor(() => (losers.length === contenders - 1 ? true : undefined), `${contenders - 1} refused resumes`)
    for (const loser of losers) {
      expect(loser.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(new RegExp(`^agentvisor: run ${runId} is being driven by [^ /]+/\\d+/[0-9a-f]+/[0-9a-f]+ \\(lease until [^)]+\\)$`))
      ])
      // With --json an exit-2 error is also the last stdout line (docs/cli.md).
      expect(JSON.parse(loser.stdout)).toEqual({ error: { kind: 'input', message: expect.stringMatching(new RegExp(`^run ${runId} is being driven by `)) } })
    }
    expect(winner).toBeUndefined()
    await waitFor(
      async () => ((await db.query('select 1 from tool_effects where run_id = $1', [runId])).length === 1 ? true : undefined),
      'the exec of the winner'
    )
    writeFileSync(path.join(ws, 'go'), '')
    const results = await Promise.all(all)
    const won = results.filter((r) => r.code !== 2)
    expect(won).toHaveLength(1)
    expect(won[0]!.code, won[0]!.stderr).toBe(0)
    expect(lastJson(won[0]!)).toEqual({ runId, status: 'succeeded', steps: 2, usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) } })
    await expectDrivenOnce(db, ws, runId)
  })

  it('lets exactly one of several Agentvisor processes released at the same instant take the lease', async () => {
    const { ws, db, runId } = await interruptedRun()
    const racers = Array.from({ length: 4 }, () => {
      const child = spawn(process.execPath, [RACER, db.url, runId], { stdio: ['pipe', 'pipe', 'pipe'] })
      processes.push(child)
      const lines: Array<Record<string, unknown>> = []
      let buffered = ''
      let stderr = ''
      child.stdout!.on('data', (d: Buffer) => {
        buffered += d.toString()
        const complete = buffered.split('\n')
        buffered = complete.pop()!
        lines.push(...complete.map((line) => JSON.parse(line) as Record<string, unknown>))
      })
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
      const exited = new Promise<number | null>((r) => child.once('exit', r))
      return { child, lines, exited, stderr: () => stderr }
    })
    await waitFor(() => (racers.every((r) => r.lines.some((l) => l['ready'] === true)) ? true : undefined), 'every racer ready')
    for (const racer of racers) racer.child.stdin!.write('go\n')
    // All but one are refused at once; the one that won is driving (and blocked in the exec).
    const outcome = await waitFor(() => {
      const answered = racers.filter((r) => r.lines.length > 1)
      return answered.length === racers.length ? answered.map((r) => r.lines[1]!) : undefined
    }, 'every racer answered')
    expect(outcome.filter((o) => o['drove'] === true)).toHaveLength(1)
    const refused = outcome.filter((o) => o['drove'] !== true)
    expect(refused).toHaveLength(racers.length - 1)
    for (const r of refused) expect(r).toEqual({ error: 'LeaseConflictError', message: expect.stringMatching(new RegExp(`^run ${runId} is being driven by `)) })
    await waitFor(
      async () => ((await db.query('select 1 from tool_effects where run_id = $1', [runId])).length === 1 ? true : undefined),
      'the exec of the winner'
    )
    writeFileSync(path.join(ws, 'go'), '')
    const codes = await Promise.all(racers.map((r) => r.exited))
    expect(codes, racers.map((r) => r.stderr()).join('\n')).toEqual(racers.map(() => 0))
    const winner = racers.find((r) => r.lines[1]!['drove'] === true)!
    expect(winner.lines[2]).toEqual({
      result: { runId, status: 'succeeded', steps: 2, usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) } }
    })
    await expectDrivenOnce(db, ws, runId)
    expect(existsSync(path.join(ws, 'out.txt'))).toBe(true)
  })
})

describe('a worker handed a child it drives already', () => {
  it('hands the request back instead of taking the lease from its own driver', async () => {
    // What a slot of a worker sees when the queue hands it a child another slot of the same
    // process drives: a live lease whose owner names this process. The lease lets its owner
    // take it again, which would fence the running driver out mid-step.
    const db = await freshDatabase()
    const store = await openStore(db.url)
    onTestFinished(() => store.close())
    const contract = Agentvisor.contract({ goal: 'Write part A into part.txt', workspace: tempDir(), providers: [{ name: 'p', kind: 'scripted', steps: [] }] })
    // Workers share their parents' store (docs/deploy.md): the parent's row is there too.
    await runCall(insertRun(store.db, childRunRow('parent-a', null, contract, new Date().toISOString())))
    const row = childRunRow('child-a', 'parent-a', contract, new Date().toISOString())
    await runCall(insertRun(store.db, { ...row, lease_owner: makeLeaseOwner(), lease_expires_at: Date.now() + 60_000, lease_token: 1 }))
    const calls: string[] = []
    const delivery: ChildDelivery = {
      request: { v: PROTOCOL_VERSION, runId: 'child-a', parentId: 'parent-a', contract },
      deliveryCount: 2,
      working: Effect.sync(() => void calls.push('working')),
      ack: Effect.sync(() => void calls.push('ack')),
      nak: Effect.sync(() => void calls.push('nak')),
      term: Effect.sync(() => void calls.push('term'))
    }
    const resume = () => Effect.sync(() => void calls.push('resume')).pipe(Effect.zipRight(Effect.die('a second driver in the same process')))
    await Effect.runPromise(handleChildDelivery({ db: store.db, resume }, delivery))
    expect(calls).toEqual(['nak'])
    expect(await db.query("select lease_token::int as token from runs where id = 'child-a'")).toEqual([{ token: 1 }])
  })
})
