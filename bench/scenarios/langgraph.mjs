// Scenario 5: the same N-step loop in LangGraph.js with its SQLite checkpointer, one node per
// step (the node does the very work of agentvisor's `list_dir` call: tool-work.mjs).
import { toolWork } from './tool-work.mjs'
import { join } from 'node:path'
import { Annotation, END, START, StateGraph } from '@langchain/langgraph'
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite'
import { nowMs, rm, tmp, workspace } from '../lib.mjs'

export const langgraphPerStepUs = async (steps) => {
  const dir = tmp('lg')
  const ws = workspace(dir)
  const State = Annotation.Root({ step: Annotation({ reducer: (_, b) => b, default: () => 0 }), last: Annotation({ reducer: (_, b) => b, default: () => '' }) })
  const graph = new StateGraph(State)
    .addNode('work', async (state) => ({ step: state.step + 1, last: await toolWork(ws) }))
    .addEdge(START, 'work')
    .addConditionalEdges('work', (state) => (state.step >= steps ? END : 'work'))
  const checkpointer = SqliteSaver.fromConnString(join(dir, 'lg.db'))
  // The same durability as agentvisor's store: WAL, synchronous NORMAL.
  checkpointer.db.pragma('journal_mode = WAL')
  checkpointer.db.pragma('synchronous = NORMAL')
  const app = graph.compile({ checkpointer })
  const t0 = nowMs()
  const final = await app.invoke({ step: 0 }, { configurable: { thread_id: 'bench' }, recursionLimit: steps + 10 })
  const ms = nowMs() - t0
  if (final.step !== steps) throw new Error(`langgraph ran ${final.step} steps`)
  checkpointer.db.close()
  rm(dir)
  return { us: (ms * 1000) / steps }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${JSON.stringify(await langgraphPerStepUs(Number(process.argv[2] ?? 1000)))}\n`)
}
