// Shared helpers of the benchmark scenarios.
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const actorsUrl = new URL('../packages/actors/dist/index.js', import.meta.url).href
export const coreUrl = new URL('../packages/core/dist/index.js', import.meta.url).href
export const cliBin = new URL('../packages/cli/bin/agentvisor.js', import.meta.url).pathname

export const tmp = (prefix) => mkdtempSync(join(tmpdir(), `avbench-${prefix}-`))
export const rm = (dir) => rmSync(dir, { recursive: true, force: true })

/** A workspace folder inside `dir`. */
export const workspace = (dir) => {
  const ws = join(dir, 'ws')
  mkdirSync(ws, { recursive: true })
  return ws
}

/** A scripted task of `steps` steps, each one cheap tool call (list_dir of '.'), then plain text. */
export const scriptedTask = (ws, steps, extra = {}) => ({
  goal: 'bench',
  workspace: ws,
  providers: [
    { name: 'script', kind: 'scripted', steps: Array.from({ length: steps }, () => ({ toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] })) }
  ],
  limits: { maxSteps: steps + 1, dispatchCeiling: 100000 },
  approval: 'auto',
  ...extra
})

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

/** Median plus spread (min..max and relative half-range) of repeated measures. */
export const stats = (xs) => {
  const med = median(xs)
  const min = Math.min(...xs)
  const max = Math.max(...xs)
  return {
    median: round(med),
    min: round(min),
    max: round(max),
    spreadPct: med === 0 ? 0 : round(((max - min) / 2 / Math.abs(med)) * 100),
    samples: xs.map(round)
  }
}

export const round = (x) => (x === null || x === undefined ? x : Math.round(x * 100) / 100)

export const nowMs = () => Number(process.hrtime.bigint()) / 1e6

/** A port free on 127.0.0.1 right now (for the servers the bench starts). */
export { freePort } from '../scripts/free-port.mjs'

/** µs per step of `av.run(task)`, which must end after at least `steps` steps, succeeded or failed. */
export const timedRunPerStepUs = async (av, task, steps) => {
  const t0 = nowMs()
  const result = await av.run(task)
  const ms = nowMs() - t0
  if (result.status !== 'succeeded' && result.status !== 'failed') throw new Error(`unexpected end ${JSON.stringify(result)}`)
  if (result.steps < steps) throw new Error(`only ${result.steps} steps: ${JSON.stringify(result)}`)
  return { us: (ms * 1000) / result.steps, steps: result.steps, status: result.status }
}
