// The work of one benchmark step: agentvisor's own `list_dir` tool on `.`, called directly the way
// its run driver calls it: on a workspace whose root is held open (as a run's is), through the
// catalogue's call that answers at once when the tool did not wait (its path check, then the
// listing through folder handles pinned against symlink swaps), and through Effect only when it
// did. The LangGraph node calls the very same tool, and its time alone is subtracted from
// agentvisor's per-step time to give the orchestration overhead.
import { createRequire } from 'node:module'
import { coreUrl, nowMs, rm, tmp, workspace } from '../lib.mjs'

const { Effect } = createRequire(new URL('../../packages/core/package.json', import.meta.url))('effect')
const { builtinCatalogue, openWorkspace, runToolCallNow, withRootHandle } = await import(coreUrl)

const opened = new Map()
const CALL = { name: 'list_dir', arguments: '{"path":"."}' }
const LIST_DIR = builtinCatalogue.get('list_dir')

export const toolWork = async (dir) => {
  let ctx = opened.get(dir)
  if (ctx === undefined) {
    const held = withRootHandle(await Effect.runPromise(openWorkspace(dir)))
    held.handle.hold()
    ctx = { runId: '', step: 0, callId: '', idempotencyKey: '', workspace: held.workspace, commands: {} }
    opened.set(dir, ctx)
  }
  const ran = runToolCallNow(builtinCatalogue, LIST_DIR, CALL, ctx)
  const outcome = Effect.isEffect(ran) ? await Effect.runPromise(ran) : ran
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
