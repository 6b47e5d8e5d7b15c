// Scenario 1: one run of N steps, every transition durable, against the raw floor.
import { join } from 'node:path'
import { createRequire } from 'node:module'
// The floor uses the very better-sqlite3 and xstate agentvisor loads (the root install's).
const requireFromStore = createRequire(new URL('../../packages/store/package.json', import.meta.url))
const requireFromActors = createRequire(new URL('../../packages/actors/package.json', import.meta.url))
const Database = requireFromStore('better-sqlite3')
const { createActor, createMachine } = requireFromActors('xstate')
import { actorsUrl, nowMs, rm, scriptedTask, timedRunPerStepUs, tmp, workspace } from '../lib.mjs'
import { toolWork } from './tool-work.mjs'

const { Agentvisor } = await import(actorsUrl)

/**
 * A long-lived Agentvisor on a store of its own, as a process that serves runs has one: the
 * section 1 scenarios drive their runs on it one after another (docs/benchmarks.md).
 */
export const openSession = async (prefix) => {
  const dir = tmp(prefix)
  const ws = workspace(dir)
  const av = await Agentvisor.open({ db: join(dir, 'av.db'), telemetry: false })
  return {
    av,
    ws,
    close: async () => {
      await av.close()
      rm(dir)
    }
  }
}

/** Runs `f(av, ws)` on `session`, or on an Agentvisor and store of its own when there is none. */
const onSession = async (session, prefix, f) => {
  if (session !== undefined) return f(session.av, session.ws)
  const own = await openSession(prefix)
  try {
    return await f(own.av, own.ws)
  } finally {
    await own.close()
  }
}

/** µs per step of one agentvisor run of `steps` steps (3 durable transitions each), on `session` if given. */
export const agentvisorPerStepUs = (steps, session) => onSession(session, 'steps', (av, ws) => timedRunPerStepUs(av, scriptedTask(ws, steps), steps))

/**
 * µs per step of one agentvisor run of `steps` steps where the model only answers text: the
 * scripted provider has no steps (it answers `done` at every dispatch), the verify checks a
 * file nobody writes, so every step fails verification, tells the model so and dispatches
 * again, until `maxSteps` ends the run `step_cap`.
 */
export const noToolPerStepUs = (steps, session) =>
  onSession(session, 'notool', async (av, ws) => {
    const t0 = nowMs()
    const result = await av.run({
      goal: 'bench',
      workspace: ws,
      providers: [{ name: 'script', kind: 'scripted', steps: [] }],
      verify: { fileContains: { path: 'never-written.txt', text: 'DONE' } },
      limits: { maxSteps: steps, dispatchCeiling: 100000 },
      approval: 'auto'
    })
    const ms = nowMs() - t0
    if (result.status !== 'step_cap' || result.steps !== steps) throw new Error(`unexpected end ${JSON.stringify(result)}`)
    return { us: (ms * 1000) / result.steps, steps: result.steps }
  })

/**
 * The floor's store and machine: an XState actor of three states, `send` + persisted snapshot +
 * one prepared INSERT per transition, one transaction per step (3 transitions each).
 */
const openFloor = (dir) => {
  const db = new Database(join(dir, 'floor.db'))
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  db.exec(
    'CREATE TABLE transitions (run_id TEXT NOT NULL, seq INTEGER NOT NULL, from_state TEXT, event TEXT, to_state TEXT, snapshot_json TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (run_id, seq))'
  )
  const insert = db.prepare('INSERT INTO transitions (run_id, seq, from_state, event, to_state, snapshot_json, at) VALUES (?, ?, ?, ?, ?, ?, ?)')
  const machine = createMachine({
    id: 'floor',
    context: { step: 0 },
    initial: 'dispatching',
    states: {
      dispatching: { on: { OK: 'acting' } },
      acting: { on: { DONE: 'verifying' } },
      verifying: { on: { NEXT: 'dispatching' } }
    }
  })
  const actor = createActor(machine).start()
  let seq = 0
  const step = db.transaction((events) => {
    for (const type of events) {
      const from = actor.getSnapshot().value
      actor.send({ type })
      const to = actor.getSnapshot().value
      seq += 1
      insert.run('run-1', seq, from, type, to, JSON.stringify(actor.getPersistedSnapshot()), new Date().toISOString())
    }
  })
  const events = ['OK', 'DONE', 'NEXT']
  return {
    step: () => step(events),
    close: () => {
      actor.stop()
      db.close()
    }
  }
}

/** The same loop with nothing but xstate send + persisted snapshot + one prepared INSERT per transition, one transaction per step. */
export const floorPerStepUs = (steps) => {
  const dir = tmp('floor')
  const floor = openFloor(dir)
  const t0 = nowMs()
  for (let i = 0; i < steps; i++) floor.step()
  const ms = nowMs() - t0
  floor.close()
  rm(dir)
  return { us: (ms * 1000) / steps }
}

/** The floor with one transaction per transition (what agentvisor does): the fairer comparison. */
export const floorPerTransitionTxUs = (steps) => {
  const dir = tmp('floor2')
  const db = new Database(join(dir, 'floor.db'))
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  db.exec(
    'CREATE TABLE transitions (run_id TEXT NOT NULL, seq INTEGER NOT NULL, from_state TEXT, event TEXT, to_state TEXT, snapshot_json TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (run_id, seq))'
  )
  const insert = db.prepare('INSERT INTO transitions (run_id, seq, from_state, event, to_state, snapshot_json, at) VALUES (?, ?, ?, ?, ?, ?, ?)')
  const machine = createMachine({ id: 'floor', initial: 'a', states: { a: { on: { OK: 'b' } }, b: { on: { DONE: 'c' } }, c: { on: { NEXT: 'a' } } } })
  const actor = createActor(machine).start()
  let seq = 0
  const one = db.transaction((type) => {
    const from = actor.getSnapshot().value
    actor.send({ type })
    seq += 1
    insert.run('run-1', seq, from, type, actor.getSnapshot().value, JSON.stringify(actor.getPersistedSnapshot()), new Date().toISOString())
  })
  const t0 = nowMs()
  for (let i = 0; i < steps; i++) {
    one('OK')
    one('DONE')
    one('NEXT')
  }
  const ms = nowMs() - t0
  actor.stop()
  db.close()
  rm(dir)
  return { us: (ms * 1000) / steps }
}

/**
 * The floor of a tool step: the floor's loop with the step's tool, agentvisor's own `list_dir`
 * (tool-work.mjs), called in the same loop before each step's transaction, as agentvisor's step
 * calls it.
 */
export const floorWithToolPerStepUs = async (steps) => {
  const dir = tmp('floortool')
  const ws = workspace(dir)
  const floor = openFloor(dir)
  await toolWork(ws) // opens the workspace, as agentvisor does before its first step
  const t0 = nowMs()
  for (let i = 0; i < steps; i++) {
    await toolWork(ws)
    floor.step()
  }
  const ms = nowMs() - t0
  floor.close()
  rm(dir)
  return { us: (ms * 1000) / steps }
}
