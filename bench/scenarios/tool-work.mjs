// The work of one benchmark step, as agentvisor's `list_dir` tool does it for `.`: the
// workspace confinement check (a realpath) and the listing (readdir with file types), both
// through Node's async fs (the libuv thread pool). The LangGraph node does exactly this too,
// and it is subtracted from agentvisor's per-step time to give the orchestration overhead.
import { readdir, realpath } from 'node:fs/promises'
import { nowMs, rm, tmp, workspace } from '../lib.mjs'

export const toolWork = async (ws) => {
  const real = await realpath(ws)
  const entries = await readdir(real, { withFileTypes: true })
  return entries.map((e) => e.name).join(',')
}

/** µs per step of that work alone, done `steps` times in a row. */
export const toolWorkPerStepUs = async (steps) => {
  const dir = tmp('work')
  const ws = workspace(dir)
  const t0 = nowMs()
  for (let i = 0; i < steps; i++) await toolWork(ws)
  const ms = nowMs() - t0
  rm(dir)
  return { us: (ms * 1000) / steps }
}
