// Scenario 7: on a PostgreSQL the bench starts itself, agentvisor's N-step `list_dir` run against
// the same loop in LangGraph.js with PostgresSaver (@langchain/langgraph-checkpoint-postgres),
// each on a fresh database of the same server, in the same process run.
//
// The server (postgres-server.mjs) runs with `synchronous_commit=off`, PostgreSQL's counterpart of
// the SQLite figures' `synchronous=NORMAL`: a commit does not wait for its WAL to reach the disk (a crash of the
// server may lose the last commits, never corrupts); fsync stays on.
import { Annotation, END, START, StateGraph } from '@langchain/langgraph'
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres'
import { actorsUrl, nowMs, rm, scriptedTask, timedRunPerStepUs, tmp, workspace } from '../lib.mjs'
import { toolWork } from './tool-work.mjs'

const { Agentvisor } = await import(actorsUrl)

export { startPostgres } from '../postgres-server.mjs'

/** µs per step of one agentvisor run of `steps` `list_dir` steps on a fresh database of `server`. */
export const agentvisorPostgresPerStepUs = async (server, steps) => {
  const dir = tmp('pgsteps')
  const ws = workspace(dir)
  const name = await server.createDatabase()
  // Opening migrates the fresh database; the timing starts after it.
  const av = await Agentvisor.open({ db: server.url(name), telemetry: false })
  try {
    return await timedRunPerStepUs(av, scriptedTask(ws, steps), steps)
  } finally {
    await av.close()
    await server.dropDatabase(name)
    rm(dir)
  }
}

/** µs per step of the same loop in LangGraph.js with PostgresSaver, on a fresh database of `server`. */
export const postgresSaverPerStepUs = async (server, steps) => {
  const dir = tmp('lgpg')
  const ws = workspace(dir)
  const name = await server.createDatabase()
  const State = Annotation.Root({ step: Annotation({ reducer: (_, b) => b, default: () => 0 }), last: Annotation({ reducer: (_, b) => b, default: () => '' }) })
  const graph = new StateGraph(State)
    .addNode('work', async (state) => ({ step: state.step + 1, last: await toolWork(ws) }))
    .addEdge(START, 'work')
    .addConditionalEdges('work', (state) => (state.step >= steps ? END : 'work'))
  const checkpointer = PostgresSaver.fromConnString(server.url(name))
  // Its pool's connections may still be closing when the database is dropped (`pg-pool` settles
  // `end()` before their sockets close): a connection dropped then emits 'error', fatal unheard.
  checkpointer.pool.on('error', () => undefined)
  try {
    await checkpointer.setup()
    const app = graph.compile({ checkpointer })
    const t0 = nowMs()
    const final = await app.invoke({ step: 0 }, { configurable: { thread_id: 'bench' }, recursionLimit: steps + 10 })
    const ms = nowMs() - t0
    if (final.step !== steps) throw new Error(`langgraph ran ${final.step} steps`)
    return { us: (ms * 1000) / steps }
  } finally {
    await checkpointer.end()
    await server.dropDatabase(name)
    rm(dir)
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const steps = Number(process.argv[2] ?? 1000)
  const server = await startPostgres()
  try {
    await agentvisorPostgresPerStepUs(server, 20)
    await postgresSaverPerStepUs(server, 20)
    const av = await agentvisorPostgresPerStepUs(server, steps)
    const lg = await postgresSaverPerStepUs(server, steps)
    process.stdout.write(`${JSON.stringify({ agentvisorUs: av.us, postgresSaverUs: lg.us, ratio: lg.us / av.us })}\n`)
  } finally {
    await server.stop()
  }
}
