// The lone run's step on SQLite and its floor, alone (docs/development.md; not part of `npm run bench`):
// section 1 of run.mjs without LangGraph and the other sections, in about a minute. Each
// repetition measures the floor, the no-tool run, the floor with the tool and the list_dir run one
// after the other (each after a full GC and an untimed warm-up, as run.mjs does), and the ratios of
// record are the medians of each repetition's own ratios. BENCH_PAIR_REPS (default 9),
// BENCH_STEPS (1000) and BENCH_WARM_STEPS (2000) as in run.mjs.
//   node --expose-gc bench/lone-run.mjs
import { round, stats } from './lib.mjs'
import { agentvisorPerStepUs, floorPerStepUs, floorWithToolPerStepUs, noToolPerStepUs, openSession } from './scenarios/steps.mjs'

const PAIR_REPS = Number(process.env.BENCH_PAIR_REPS ?? 9)
const STEPS = Number(process.env.BENCH_STEPS ?? 1000)
const COLD_STEPS = 300
const WARM_STEPS = Math.max(COLD_STEPS, Number(process.env.BENCH_WARM_STEPS ?? 2000))

const sessions = { noTool: await openSession('notool'), av: await openSession('steps') }
const scenarios = {
  floor: floorPerStepUs,
  noTool: (steps) => noToolPerStepUs(steps, sessions.noTool),
  floorTool: floorWithToolPerStepUs,
  listDir: (steps) => agentvisorPerStepUs(steps, sessions.av)
}
const measured = async (f) => {
  globalThis.gc?.()
  await f(WARM_STEPS)
  return (await f(STEPS)).us
}
const samples = { floor: [], noTool: [], floorTool: [], listDir: [] }
for (const f of Object.values(scenarios)) await f(100) // warm-up (JIT, module load)
for (let i = 0; i < PAIR_REPS; i++) {
  for (const [name, f] of Object.entries(scenarios)) samples[name].push(await measured(f))
  process.stderr.write(
    `[lone-run] rep ${i + 1}: floor ${round(samples.floor[i])}, no-tool ${round(samples.noTool[i])}, floor+tool ${round(samples.floorTool[i])}, list_dir ${round(samples.listDir[i])} µs/step\n`
  )
}
await sessions.noTool.close()
await sessions.av.close()
const ratios = (a, b) => stats(samples[a].map((x, i) => x / samples[b][i])).median
const medians = Object.fromEntries(Object.entries(samples).map(([name, xs]) => [name, stats(xs).median]))
console.log(
  JSON.stringify({
    perStepUs: medians,
    noToolOverFloor: ratios('noTool', 'floor'),
    perStepOverFloorWithTool: ratios('listDir', 'floorTool'),
    perStepOverFloor: ratios('listDir', 'floor'),
    repetitions: PAIR_REPS,
    steps: STEPS
  })
)
