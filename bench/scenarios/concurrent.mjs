// Scenarios 2 and 3: many concurrent runs in one process (throughput, peak RSS, idle RSS per run),
// then the resume of as many interrupted runs. Run in its own process: `node concurrent.mjs RUNS STEPS`.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { actorsUrl, nowMs, rm, scriptedTask, tmp, workspace } from '../lib.mjs'

const { Agentvisor } = await import(actorsUrl)
const runs = Number(process.argv[2] ?? 1000)
const steps = Number(process.argv[3] ?? 10)
// `throughput` or `idle` (idle RSS, then resume): separate processes, so RSS figures stay clean.
const phase = process.argv[4] ?? 'throughput'
const gc = () => {
  globalThis.gc?.()
  globalThis.gc?.()
}
const rssKb = () => process.memoryUsage().rss / 1024
/**
 * The main thread's CPU time so far, in µs, from /proc (Linux; undefined elsewhere): its user and
 * system clock ticks (fields 14 and 15 of its `stat`), 10 ms each on the kernels Node supports here.
 */
const mainThreadCpuUs = () => {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 10_000
  } catch {
    return undefined
  }
}
/** A full GC, then a second's wait for the pages it freed to leave RSS. */
const settle = async () => {
  gc()
  await new Promise((r) => setTimeout(r, 1000))
}

const dir = tmp('conc')
const ws = workspace(dir)
const out = {}
try {
  // 2. Throughput: `runs` runs of `steps` steps, all started at once.
  if (phase === 'throughput') {
    const av = await Agentvisor.open({ db: join(dir, 'throughput.db'), telemetry: false })
    gc()
    const base = rssKb()
    // Untimed batches first warm the JIT up, as in a process that has been serving runs. No forced
    // GC between them and the timed batch: one would throw away the optimized code that held the
    // warm-up's runs (docs/benchmarks.md, the cold row), which a serving process never does.
    // Each as many runs as the timed batch, and three of them (BENCH_WARM_BATCHES): measured
    // (2026-12-03, `--trace-opt`, batches of 1,000 runs in one process) V8 still compiles ~400
    // functions in the first batch, ~140 in the second (~1.7 s of compiler threads' CPU inside a
    // ~2.2 s batch, on a machine of two cores), ~40-55 in each one after; steps/s 3,200-3,500,
    // 4,700-5,000, then a plateau of 5,000-6,400 from the third batch on. With one warm-up batch
    // (until 2026-12-03) the timed batch was the second, still compiling.
    const warm = Number(process.env.BENCH_WARM_RUNS ?? runs)
    const warmBatches = Number(process.env.BENCH_WARM_BATCHES ?? 3)
    for (let b = 0; b < warmBatches && warm > 0; b++) {
      await Promise.all((await Promise.all(Array.from({ length: warm }, () => av.start(scriptedTask(ws, steps))))).map((r) => r.result))
    }
    let peak = base
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssKb())
    }, 20)
    // CPU time too, every thread's and the main thread's: unlike steps/s, it does not depend on
    // how much of the machine's cores the process was given meanwhile (docs/benchmarks.md).
    const cpu0 = process.cpuUsage()
    const main0 = mainThreadCpuUs()
    const t0 = nowMs()
    const started = await Promise.all(Array.from({ length: runs }, () => av.start(scriptedTask(ws, steps))))
    const results = await Promise.all(started.map((r) => r.result))
    const ms = nowMs() - t0
    const cpu = process.cpuUsage(cpu0)
    const main1 = mainThreadCpuUs()
    clearInterval(sampler)
    peak = Math.max(peak, rssKb())
    const total = results.reduce((n, r) => n + r.steps, 0)
    const bad = results.filter((r) => r.status !== 'succeeded').length
    await av.close()
    Object.assign(out, {
      concurrentMs: ms,
      concurrentSteps: total,
      concurrentStepsPerSec: (total / ms) * 1000,
      concurrentCpuUsPerStep: (cpu.user + cpu.system) / total,
      concurrentMainCpuUsPerStep: main0 === undefined || main1 === undefined ? null : (main1 - main0) / total,
      peakRssMb: peak / 1024,
      peakRssPerRunKb: (peak - base) / runs,
      warmBatches: warm > 0 ? warmBatches : 0,
      notSucceeded: bad
    })
  }
  // 2b. Idle RSS per run: `runs` runs each waiting in a long model call (their first step).
  const db = join(dir, 'idle.db')
  let ids
  if (phase === 'idle') {
    const av = await Agentvisor.open({ db, telemetry: false })
    // RSS once settled, before and after: the runs are idle, and what a GC frees reaches the OS
    // a little later (V8 uncommits freed pages after the collection, not within it).
    await settle()
    const base = rssKb()
    let dispatched = 0
    const idle = scriptedTask(ws, steps)
    idle.providers[0].steps[0] = { ...idle.providers[0].steps[0], delayMs: 3_600_000 }
    const started = await Promise.all(Array.from({ length: runs }, () => av.start(idle)))
    ids = started.map((r) => r.runId)
    // Wait until every run has written its attempt row: they all sit in `dispatching`.
    const { openStore } = await import(new URL('../../packages/store/dist/index.js', import.meta.url).href)
    const store = await openStore(db)
    for (;;) {
      const row = await store.db
        .selectFrom('attempts')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow()
      dispatched = Number(row.n)
      if (dispatched >= runs) break
      await new Promise((r) => setTimeout(r, 50))
    }
    await store.close()
    await new Promise((r) => setTimeout(r, 200))
    await settle()
    const idleRss = rssKb()
    Object.assign(out, { idleRssMb: idleRss / 1024, rssPerRunKb: (idleRss - base) / runs })
    // Interrupt them all, like a crash: no final transition, every run stays resumable.
    await av.close()
  }
  // 3. Resume: time until every interrupted run is being driven again.
  if (phase === 'idle') {
    const av = await Agentvisor.open({ db, telemetry: false })
    const t0 = nowMs()
    const resumed = await Promise.all(ids.map((id) => av.resume(id)))
    const ms = nowMs() - t0
    Object.assign(out, { resumeMs: ms, resumed: resumed.length })
    await av.close()
  }
} finally {
  rm(dir)
}
process.stdout.write(`${JSON.stringify(out)}\n`)
