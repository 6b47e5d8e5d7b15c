// The work of one benchmark step: agentvisor's own `list_dir` tool on `.`, called directly (its
// path check, then the listing through folder handles pinned against symlink swaps, all through
// Node's async fs). The LangGraph node calls the very same tool, and its time alone is
// subtracted from agentvisor's per-step time to give the orchestration overhead.
import { createRequire } from 'node:module'
import { coreUrl, nowMs, rm, tmp, workspace } from '../lib.mjs'

const { Effect } = createRequire(new URL('../../packages/core/package.json', import.meta.url))('effect')
const { openWorkspace, runTool } = await import(coreUrl)

const opened = new Map()
const CALL = { name: 'list_dir', arguments: '{"path":"."}' }

export const toolWork = async (dir) => {
  let ws = opened.get(dir)
  if (ws === undefined) {
    ws = await Effect.runPromise(openWorkspace(dir))
    opened.set(dir, ws)
  }
  const outcome = await Effect.runPromise(runTool(ws, CALL))
  if (!outcome.ok) throw new Error(`list_dir failed: ${outcome.output}`)
  return outcome.output
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
