// A paired A/B of the per-step cost of two builds in one process (docs/development.md; not part of `npm run bench`):
// each repetition runs the same scenario on both, one after the other, so host drift cancels.
//   node --expose-gc ab.mjs /path/to/other/checkout   (AB_REPS pairs, default 15, of AB_STEPS-step runs, default 1000)
import { join } from 'node:path'
import { nowMs, rm, scriptedTask, tmp, workspace } from './lib.mjs'
const REPS = Number(process.env.AB_REPS ?? 15)
const STEPS = Number(process.env.AB_STEPS ?? 1000)
const builds = {
  new: (await import(new URL('../packages/actors/dist/index.js', import.meta.url).href)).Agentvisor,
  base: (await import(`file://${join(process.argv[2], 'packages/actors/dist/index.js')}`)).Agentvisor
}
const open = async (Agentvisor, prefix) => {
  const dir = tmp(prefix)
  return { av: await Agentvisor.open({ db: join(dir, 'av.db'), telemetry: false }), ws: workspace(dir), dir }
}
const noTool = async ({ av, ws }, steps) => {
  const t0 = nowMs()
  const r = await av.run({
    goal: 'bench',
    workspace: ws,
    providers: [{ name: 'script', kind: 'scripted', steps: [] }],
    verify: { fileContains: { path: 'x.txt', text: 'D' } },
    limits: { maxSteps: steps, dispatchCeiling: 100000 },
    approval: 'auto'
  })
  return ((nowMs() - t0) * 1000) / r.steps
}
const listDir = async ({ av, ws }, steps) => {
  const t0 = nowMs()
  const r = await av.run(scriptedTask(ws, steps))
  return ((nowMs() - t0) * 1000) / r.steps
}
const s = { new: await open(builds.new, 'abnew'), base: await open(builds.base, 'abbase') }
for (const k of ['new', 'base']) {
  await noTool(s[k], 2000)
  await listDir(s[k], 2000)
}
const ratios = { noTool: [], listDir: [] }
const perStep = { new: { noTool: [], listDir: [] }, base: { noTool: [], listDir: [] } }
const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
for (let i = 0; i < REPS; i++) {
  global.gc?.()
  const order = i % 2 === 0 ? ['new', 'base'] : ['base', 'new']
  const t = {}
  for (const k of order) t[k] = { noTool: await noTool(s[k], STEPS), listDir: await listDir(s[k], STEPS) }
  ratios.noTool.push(t.new.noTool / t.base.noTool)
  ratios.listDir.push(t.new.listDir / t.base.listDir)
  for (const k of order) for (const scenario of ['noTool', 'listDir']) perStep[k][scenario].push(t[k][scenario])
}
console.log(`new/base per step: no-tool ${med(ratios.noTool).toFixed(3)}, list_dir ${med(ratios.listDir).toFixed(3)}  (medians of ${REPS} pairs)`)
for (const k of ['new', 'base'])
  console.log(`${k}: no-tool ${med(perStep[k].noTool).toFixed(1)} µs/step, list_dir ${med(perStep[k].listDir).toFixed(1)} µs/step  (medians)`)
for (const k of ['new', 'base']) {
  await s[k].av.close()
  rm(s[k].dir)
}
process.exit(0)
