// A paired A/B of the per-step cost of two builds on one PostgreSQL (docs/development.md; not part
// of `npm run bench`): the bench's server (scenarios/postgres.mjs) and its `list_dir` run, each
// repetition both builds one after the other on fresh databases of that server, so host drift
// cancels. Prints the median of the ratios new/base, and the server's CPU a step for each build
// (its backends' utime + stime, from /proc, when the server runs on this machine).
//   node --expose-gc ab-postgres.mjs /path/to/other/checkout
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { nowMs, rm, scriptedTask, tmp, workspace } from './lib.mjs'
import { startPostgres } from './scenarios/postgres.mjs'

const builds = {
  new: (await import(new URL('../packages/actors/dist/index.js', import.meta.url).href)).Agentvisor,
  base: (await import(`file://${join(process.argv[2], 'packages/actors/dist/index.js')}`)).Agentvisor
}
const STEPS = Number(process.env.AB_STEPS ?? 1000)
const REPS = Number(process.env.AB_REPS ?? 11)
const server = await startPostgres()

/** CPU ms of every `postgres` process (the bench's server is the only one the bench starts). */
const serverCpuMs = () => {
  let ticks = 0
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      if (!stat.includes('(postgres)')) continue
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {}
  }
  return ticks * 10
}

/** µs a step and the server's µs a step of one `steps`-step run of `build` on a fresh database. */
const perStep = async (Agentvisor, steps) => {
  const dir = tmp('abpg')
  const name = await server.createDatabase()
  const av = await Agentvisor.open({ db: server.url(name), telemetry: false })
  try {
    const ws = workspace(dir)
    await av.run(scriptedTask(ws, 300))
    const cpu0 = serverCpuMs()
    const t0 = nowMs()
    const r = await av.run(scriptedTask(ws, steps))
    return { us: ((nowMs() - t0) * 1000) / r.steps, serverUs: ((serverCpuMs() - cpu0) * 1000) / r.steps }
  } finally {
    await av.close()
    await server.dropDatabase(name)
    rm(dir)
  }
}

const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
try {
  for (const k of ['new', 'base']) await perStep(builds[k], 2000)
  const ratios = []
  const serverUs = { new: [], base: [] }
  const us = { new: [], base: [] }
  for (let i = 0; i < REPS; i++) {
    globalThis.gc?.()
    const order = i % 2 === 0 ? ['new', 'base'] : ['base', 'new']
    const t = {}
    for (const k of order) {
      t[k] = await perStep(builds[k], STEPS)
      serverUs[k].push(t[k].serverUs)
      us[k].push(t[k].us)
    }
    ratios.push(t.new.us / t.base.us)
  }
  console.log(
    `new/base per step on PostgreSQL: ${med(ratios).toFixed(3)} (median of ${REPS} pairs); µs a step: new ${med(us.new).toFixed(0)}, base ${med(us.base).toFixed(0)}; ` +
      `server CPU µs a step: new ${med(serverUs.new).toFixed(0)}, base ${med(serverUs.base).toFixed(0)}`
  )
} finally {
  await server.stop()
}
process.exit(0)
