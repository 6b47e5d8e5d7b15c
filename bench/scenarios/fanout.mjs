// Scenario 4: a parent fanning out CHILDREN children to WORKERS `agentvisor worker` processes over
// a real nats-server; the overhead per child beyond the children's own work.
//
// Definition (per repetition, then median and spread over BENCH_REPS repetitions):
//
//   childOverheadMs = (fanOutMs - directMs) / CHILDREN
//
// - fanOutMs: wall time of `av.run(parent)` in this process, opened with `nats`, from the call to
//   the parent's `succeeded`. The parent's first model call asks for CHILDREN `spawn_child` calls
//   (`children: { maxChildren: CHILDREN, maxConcurrent: CHILDREN }`: all are handed to the
//   JetStream work queue at once); WORKERS workers (`--concurrency WORKER_CONCURRENCY` each),
//   sharing the parent's SQLite file as the tests and examples/parent-children do, drive them;
//   the parent waits in `awaitingChildren`, then makes its second (last) model call.
// - directMs: the same CHILDREN child runs (same goal, provider, limits and policy as the child
//   contracts, each in its own folder) run with `av.run` by an embedded `Agentvisor` in this
//   process, no NATS, no parent, WORKERS x WORKER_CONCURRENCY at a time: the fan-out's own
//   parallelism.
// - Each child's work is one model call answered at once with text and no tool call, by the same
//   `agentvisor mock-llm` process (OpenAI wire, 127.0.0.1) in both cases, so the difference is what
//   the fan-out adds: JetStream submit/pull/ack, the child row, lease and transitions written by
//   three processes into one SQLite file, the parent's wait, and the parent's own two steps.
// - childCpuOverheadMs: the same difference in CPU time (user + system) summed over every process
//   of the scenario (this one, the workers, nats-server, the mock; /proc/PID/stat), per child. The
//   wall figure nets out what the fan-out gains by running children in two more processes (on
//   other cores); the CPU figure does not, so it is the larger one on a machine with spare cores.
// nats-server, the mock and the workers are started (and, for the workers, serving) before any
// timing; one untimed fan-out and one direct batch of full size warm everything up first; all of
// them are stopped by PID at the end (also on SIGINT/SIGTERM).
//
// Alone: `npm run build && node bench/scenarios/fanout.mjs` (env BENCH_REPS, BENCH_CHILDREN).
import { execFileSync, spawn } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createConnection } from 'node:net'
import { join } from 'node:path'
import { actorsUrl, cliBin, freePort, nowMs, rm, tmp } from '../lib.mjs'

export const FANOUT_CHILDREN = Number(process.env.BENCH_CHILDREN ?? 100)
export const FANOUT_WORKERS = 2
/** The worker's default `--concurrency`. */
export const FANOUT_WORKER_CONCURRENCY = 4
const CHILD_GOAL = 'bench child'

const log = (line) => process.stderr.write(`[bench] ${line}\n`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const accepts = (port) =>
  new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })

/** Resolves when `test()` is truthy; rejects after `ms`, or as soon as `child` exits. */
const waitFor = async (what, test, child, ms = 20_000) => {
  const deadline = Date.now() + ms
  while (!test()) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${what}: the process exited (${child.exitCode ?? child.signalCode}) before it was ready`)
    if (Date.now() > deadline) throw new Error(`${what}: not ready after ${ms} ms`)
    await sleep(20)
  }
}

/** The mock's scenarios: per parent size a model whose first turn fans out; every child answers at once. */
const scenarios = (sizes) => ({
  replay: 'turn',
  models: Object.fromEntries(
    sizes.map((n) => [
      `fanout-${n}`,
      [
        { toolCalls: Array.from({ length: n }, (_, i) => ({ name: 'spawn_child', arguments: { goal: `${CHILD_GOAL} ${i + 1}` } })) },
        { text: `all ${n} children are done` }
      ]
    ])
  ),
  goals: { [CHILD_GOAL]: [{ text: 'ok' }] }
})

const provider = (url, n) => ({ name: 'mock', kind: 'openai', baseUrl: url, model: `fanout-${n}`, stream: false })
const LIMITS = { maxSteps: 10, maxRetries: 2, dispatchCeiling: 100000, timeoutMs: 600000 }

/** The parent task: its first step spawns `n` children. */
const parentTask = (ws, url, n) => ({
  goal: `Split the work into ${n} parts, one child run per part`,
  workspace: ws,
  providers: [provider(url, n)],
  limits: LIMITS,
  children: { maxChildren: n, maxDepth: 1, maxConcurrent: n },
  approval: 'auto'
})

/** Child i of that parent as a run of its own (what `childContract` makes of the call, minus the lineage). */
const directChildTask = (ws, url, n, i) => ({
  goal: `${CHILD_GOAL} ${i + 1}`,
  workspace: join(ws, 'children', String(i + 1)),
  providers: [provider(url, n)],
  limits: LIMITS,
  // A child at depth 1 of maxDepth 1 is not offered spawn_child: neither is this root run.
  children: { maxChildren: n, maxDepth: 0, maxConcurrent: n },
  approval: 'auto'
})

let ticksPerSecond
/** CPU time (user + system, ms) a process of ours has used so far, from /proc/PID/stat. */
const cpuMsOf = (pid) => {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ') // fields[0] is field 3 (state)
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond
}
const selfCpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

/** Runs `f(0..n-1)`, `width` at a time. */
const pool = async (n, width, f) => {
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(n, width) }, async () => {
      while (next < n) await f(next++)
    })
  )
}

/** Stops a process we started, by its PID: SIGTERM, then SIGKILL after 5 s. */
const stop = async (child) => {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((r) => child.once('exit', r))
  try {
    process.kill(child.pid, 'SIGTERM')
  } catch {
    return
  } // already gone
  const timer = setTimeout(() => {
    try {
      process.kill(child.pid, 'SIGKILL')
    } catch {}
  }, 5000)
  await exited
  clearTimeout(timer)
}

/**
 * Measures the fan-out `reps` times. Returns per repetition { fanOutMs, directMs, overheadMs }
 * and how many children each worker drove.
 */
export const childOverhead = async ({ reps = 3, children = FANOUT_CHILDREN, workers = FANOUT_WORKERS, workerConcurrency = FANOUT_WORKER_CONCURRENCY } = {}) => {
  const { Agentvisor } = await import(actorsUrl)
  const dir = tmp('fanout')
  const procs = []
  const onSignal = async (signal) => {
    for (const p of [...procs].reverse()) await stop(p).catch(() => {})
    rm(dir)
    process.exit(signal === 'SIGINT' ? 130 : 143)
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  // No AGENTVISOR_* from the caller's shell (another NATS prefix, stream, db...) leaks into the workers.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AGENTVISOR_')))
  let parentAv
  let directAv
  try {
    // The mock LLM, in a process of its own (the same one serves the fan-out and the direct runs).
    const scenariosFile = join(dir, 'scenarios.json')
    writeFileSync(scenariosFile, JSON.stringify(scenarios([children])))
    const mock = spawn(process.execPath, [cliBin, 'mock-llm', '--scenarios', scenariosFile, '--port', '0'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    procs.push(mock)
    let mockOut = ''
    let mockErr = ''
    mock.stdout.on('data', (d) => (mockOut += d))
    mock.stderr.on('data', (d) => (mockErr += d))
    await waitFor(`mock-llm ${mockErr}`, () => /listening on (\S+)/.test(mockOut), mock)
    const mockUrl = /listening on (\S+)/.exec(mockOut)[1]
    const apiUrl = mockUrl // `http://127.0.0.1:PORT/v1`

    // nats-server: JetStream on, loopback, a free port, a temporary store folder.
    const port = await freePort()
    const natsStore = join(dir, 'nats')
    mkdirSync(natsStore)
    const nats = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', natsStore], { stdio: 'ignore' })
    procs.push(nats)
    let spawnError
    nats.once('error', (e) => (spawnError = e))
    for (let i = 0; !(await accepts(port)); i++) {
      if (spawnError !== undefined) throw new Error(`cannot start nats-server (is it installed?): ${spawnError.message}`)
      if (nats.exitCode !== null) throw new Error(`nats-server exited early with code ${nats.exitCode}`)
      if (i > 200) throw new Error(`nats-server did not accept connections on 127.0.0.1:${port}`)
      await sleep(50)
    }
    const natsUrl = `nats://127.0.0.1:${port}`

    // The parent's store first (created and migrated here), then the workers on the same file.
    const db = join(dir, 'fanout.db')
    parentAv = await Agentvisor.open({ db, nats: { servers: natsUrl }, telemetry: false })
    const logs = []
    for (let w = 0; w < workers; w++) {
      const worker = spawn(process.execPath, [cliBin, 'worker', '--nats', natsUrl, '--db', db, '--concurrency', String(workerConcurrency)], {
        env,
        stdio: ['ignore', 'ignore', 'pipe']
      })
      procs.push(worker)
      const i = logs.push('') - 1
      worker.stderr.on('data', (d) => (logs[i] += d))
      await waitFor(`worker ${w + 1}`, () => logs[i].includes('serving'), worker)
    }
    const started = () => logs.map((l) => (l.match(/ started \(child of /g) ?? []).length)
    const workerProcs = procs.slice(2)

    // CPU time (ms) used so far by every process of the scenario: this one (the parent, the
    // direct runs), the mock, nats-server and the workers.
    const cpu = () => ({ bench: selfCpuMs(), mock: cpuMsOf(mock.pid), nats: cpuMsOf(nats.pid), workers: workerProcs.reduce((t, p) => t + cpuMsOf(p.pid), 0) })
    const cpuSince = (a) => {
      const b = cpu()
      const d = Object.fromEntries(Object.keys(a).map((k) => [k, b[k] - a[k]]))
      return { ...d, total: Object.values(d).reduce((x, y) => x + y, 0) }
    }

    // The embedded baseline, its own store.
    directAv = await Agentvisor.open({ db: join(dir, 'direct.db'), telemetry: false })

    // Between phases: until the workers and nats-server are idle (a fan-out's last acks and lease
    // releases may trail the parent's end), at most 3 s, so one phase does not slow the next.
    const settle = async () => {
      const idleOf = () => {
        const c = cpu()
        return c.workers + c.nats
      }
      for (let i = 0; i < 12; i++) {
        const before = idleOf()
        await sleep(250)
        if (idleOf() - before < 5) return
      }
    }

    const fanOut = async (n, ws) => {
      const c0 = cpu()
      const t0 = nowMs()
      const result = await parentAv.run(parentTask(ws, apiUrl, n))
      const ms = nowMs() - t0
      const cpuMs = cpuSince(c0)
      if (result.status !== 'succeeded') throw new Error(`fan-out parent ended ${result.status}: ${JSON.stringify(result.error ?? {})}`)
      return { ms, cpuMs, runId: result.runId }
    }
    const direct = async (n, ws) => {
      const bad = []
      const c0 = cpu()
      const t0 = nowMs()
      await pool(n, workers * workerConcurrency, async (i) => {
        const r = await directAv.run(directChildTask(ws, apiUrl, n, i))
        if (r.status !== 'succeeded' || r.steps !== 1) bad.push(r)
      })
      const ms = nowMs() - t0
      const cpuMs = cpuSince(c0)
      if (bad.length > 0) throw new Error(`${bad.length} direct child runs did not succeed in 1 step: ${JSON.stringify(bad[0])}`)
      return { ms, cpuMs }
    }

    // Warm-up, one of each at full size: JIT in every process, connections, the JetStream stream
    // and consumer, the SQLite files (a smaller one leaves the workers' code cold for repetition 1).
    await direct(children, join(dir, 'warm-direct'))
    await fanOut(children, join(dir, 'warm-fanout'))

    const samples = []
    for (let rep = 0; rep < reps; rep++) {
      await settle()
      const { ms: directMs, cpuMs: directCpu } = await direct(children, join(dir, `direct-${rep}`))
      await settle()
      const before = started()
      const { ms: fanOutMs, cpuMs: fanOutCpu, runId } = await fanOut(children, join(dir, `fanout-${rep}`))
      const perWorker = started().map((n, i) => n - before[i])
      const { children: kids } = await childrenOf(db, runId)
      if (kids.length !== children || kids.some((k) => k.status !== 'succeeded')) {
        throw new Error(`fan-out: ${kids.filter((k) => k.status === 'succeeded').length} of ${children} children succeeded (${kids.length} rows)`)
      }
      const sample = {
        fanOutMs,
        directMs,
        overheadMs: (fanOutMs - directMs) / children,
        fanOutCpu,
        directCpu,
        cpuOverheadMs: (fanOutCpu.total - directCpu.total) / children,
        perWorker
      }
      const r0 = (x) => x.toFixed(0)
      log(
        `   rep ${rep + 1}: fan-out ${r0(fanOutMs)} ms, direct ${r0(directMs)} ms: ${sample.overheadMs.toFixed(2)} ms/child; children per worker ${perWorker.join('/')}`
      )
      log(
        `          CPU ms fan-out ${r0(fanOutCpu.total)} (parent ${r0(fanOutCpu.bench)}, workers ${r0(fanOutCpu.workers)}, nats ${r0(fanOutCpu.nats)}, mock ${r0(fanOutCpu.mock)}), direct ${r0(directCpu.total)} (bench ${r0(directCpu.bench)}, mock ${r0(directCpu.mock)}): ${sample.cpuOverheadMs.toFixed(2)} CPU ms/child`
      )
      samples.push(sample)
    }
    return { samples, children, workers, workerConcurrency }
  } finally {
    await parentAv?.close()
    await directAv?.close()
    for (const p of [...procs].reverse()) await stop(p)
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    rm(dir)
  }
}

/** The children of `runId` in the shared store (the workers wrote them). */
const childrenOf = async (db, runId) => {
  const { openStore } = await import(new URL('../../packages/store/dist/index.js', import.meta.url).href)
  const store = await openStore(db)
  try {
    const rows = await store.db.selectFrom('runs').select(['id', 'status', 'steps']).where('parent_id', '=', runId).execute()
    return { children: rows }
  } finally {
    await store.close()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { round, stats } = await import('../lib.mjs')
  const roundAll = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, round(v)]))
  const reps = Number(process.env.BENCH_REPS ?? 3)
  log(`4. fan-out of ${FANOUT_CHILDREN} children to ${FANOUT_WORKERS} workers over NATS, ${reps} repetitions`)
  const r = await childOverhead({ reps })
  const out = {
    childOverheadMs: stats(r.samples.map((s) => s.overheadMs)),
    fanOutMs: stats(r.samples.map((s) => s.fanOutMs)),
    directMs: stats(r.samples.map((s) => s.directMs)),
    childCpuOverheadMs: stats(r.samples.map((s) => s.cpuOverheadMs)),
    cpu: r.samples.map((s) => ({ fanOut: roundAll(s.fanOutCpu), direct: roundAll(s.directCpu) })),
    childrenPerWorker: r.samples.map((s) => s.perWorker),
    children: r.children,
    workers: r.workers,
    workerConcurrency: r.workerConcurrency
  }
  process.stdout.write(`${JSON.stringify(out)}\n`)
}
