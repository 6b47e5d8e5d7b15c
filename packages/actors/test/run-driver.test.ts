import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Effect, Either, TestContext } from 'effect'
import { createActor } from 'xstate'
import { DEFAULT_RETRY_POLICY, openWorkspace, parseTaskContract, type TaskContract } from '@agentvisor/core'
import { makeScriptedProvider, type ScriptedStep } from '@agentvisor/core/testing'
import { fencedCall, LeaseLostError, makeRunWriter, openStore, type RunWriter, type Store } from '@agentvisor/store'
import { DEFAULT_CIRCUIT_BREAKER, makeCircuitBreakers } from '../src/driver/circuit-breaker.js'
import { makeTreeBudgets } from '../src/driver/budget.js'
import { UsageTally } from '@agentvisor/core'
import { openingMessages } from '../src/driver/conversation.js'
import { makeRunDriver } from '../src/driver/run-driver.js'
import { childRunRow } from '../src/protocol/child-contract.js'
import { ENTRY_WORK, type EntryWorkTable } from '../src/driver/entry-work.js'
import { later } from '../src/driver/now.js'
import { loadRunPolicy } from '../src/approval/run-policy.js'
import { runMachine } from '../src/machine/run-machine.js'
import { runCall } from '../../../test/support/run-call.js'

const stores: Store[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
})

/** What the driver asked of the store, one entry per `commit` or `write` of the RunWriter. */
interface StoreCall {
  readonly call: 'commit' | 'write'
  /** The transitions committed, as `from>to`. */
  readonly transitions: ReadonlyArray<string>
  /** The step data written, by op and step. */
  readonly writes: ReadonlyArray<string>
}

const describeWrite = (write: Parameters<RunWriter['write']>[2][number]): string => {
  switch (write.op) {
    case 'insertAttempt':
    case 'insertStep':
      return `${write.op} ${write.row.step}`
    case 'startToolEffect':
      return `${write.op} ${write.row.step}`
    case 'settleAttempt':
    case 'setStepResults':
    case 'setStepFeedback':
    case 'completeToolEffect':
      return `${write.op} ${write.step}`
    default:
      return write.op
  }
}

/** The real SQLite writer, counting what the driver asks of it. */
const countingWriter = (writer: RunWriter, calls: StoreCall[]): RunWriter => ({
  ...writer,
  commit: (commit, options) => {
    calls.push({ call: 'commit', transitions: commit.transitions.map((t) => `${t.from}>${t.to}`), writes: commit.writes.map(describeWrite) })
    return writer.commit(commit, options)
  },
  write: (runId, leaseToken, writes) => {
    calls.push({ call: 'write', transitions: [], writes: writes.map(describeWrite) })
    return writer.write(runId, leaseToken, writes)
  }
})

/**
 * One run driven by `makeRunDriver` itself on a real SQLite store, the way the supervisor drives
 * it (without its cancel and lease watching), with `entryWork` standing in for the machine's table.
 */
const driveRun = async (
  steps: ReadonlyArray<ScriptedStep>,
  entryWork: EntryWorkTable = ENTRY_WORK,
  /** How the store answers the driver's commits (a test may make it answer later, or refuse). */
  wrap: (writer: RunWriter) => RunWriter = (writer) => writer,
  /** `test`: the drive's Clock stands still (TestClock), so every commit is at one instant. */
  clock: 'live' | 'test' = 'live'
) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'av-run-driver-'))
  const store = await openStore(path.join(dir, 'av.db'))
  stores.push(store)
  const calls: StoreCall[] = []
  const writer = wrap(countingWriter(makeRunWriter(store), calls))
  const parsed = parseTaskContract(
    { goal: 'g', workspace: path.join(dir, 'ws'), approval: 'auto', providers: [{ name: 'primary', kind: 'scripted', steps: [] }] },
    dir
  )
  if (Either.isLeft(parsed)) throw parsed.left
  const contract: TaskContract = parsed.right
  const provider = makeScriptedProvider({ name: 'primary', steps })
  const runId = 'run-1'
  const at = new Date().toISOString()
  // The row of a new run, as the supervisor writes it (no parent: a root run).
  const leaseToken = await runCall(writer.createRun(childRunRow(runId, null, contract, at), { owner: 'test', expiresAt: Date.now() + 60_000 }))
  const policy = await Effect.runPromise(loadRunPolicy(store.db, contract))
  if (Either.isLeft(policy)) throw new Error(policy.left)
  const actor = createActor(runMachine, {
    input: {
      maxSteps: contract.limits.maxSteps,
      maxRetries: contract.limits.maxRetries,
      dispatchCeiling: contract.limits.dispatchCeiling,
      providerCount: 1,
      timeoutMs: contract.limits.timeoutMs
    }
  }).start()
  const driver = makeRunDriver(
    {
      db: store.db,
      writer,
      runId,
      contract,
      providers: [provider],
      workspace: await Effect.runPromise(openWorkspace(contract.workspace)),
      actor,
      messages: openingMessages(contract),
      seq: 0,
      observers: [],
      retryPolicy: DEFAULT_RETRY_POLICY,
      deadline: Date.now() + 60_000,
      attemptTimeoutMs: 10_000,
      breakers: makeCircuitBreakers(DEFAULT_CIRCUIT_BREAKER),
      budgets: makeTreeBudgets(),
      usage: new UsageTally(false),
      policy: policy.right,
      newId: () => crypto.randomUUID(),
      leaseToken
    },
    entryWork
  )
  const outcome = await Effect.runPromise(Effect.either(clock === 'test' ? Effect.provide(driver.drive, TestContext.TestContext) : driver.drive))
  actor.stop()
  const sqlite = store.sqlite!
  return {
    calls,
    /** What stopped the drive, when it failed. */
    failure: Either.isLeft(outcome) ? outcome.left : undefined,
    provider,
    ws: path.join(dir, 'ws'),
    run: sqlite.prepare('SELECT status, state, steps, error_json FROM runs WHERE id = ?').get(runId) as {
      status: string
      state: string
      steps: number
      error_json: string | null
    },
    attempts: sqlite.prepare('SELECT attempt, outcome FROM attempts WHERE run_id = ? ORDER BY step, attempt').all(runId) as Array<{
      attempt: number
      outcome: string
    }>,
    transitions: (
      sqlite.prepare('SELECT from_state, event, to_state FROM transitions WHERE run_id = ? ORDER BY seq').all(runId) as Array<{
        from_state: string
        event: string
        to_state: string
      }>
    ).map((t) => `${t.from_state} -${t.event}-> ${t.to_state}`)
  }
}

const writeFile = (p: string, content: string): ScriptedStep => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })

describe('the run driver', () => {
  it('has entry work, or none, for every state of the machine, checked by the compiler', () => {
    const { awaitingChildren: _left, ...withoutOne } = ENTRY_WORK
    // @ts-expect-error a table that misses a state of run-machine.ts is not an EntryWorkTable
    const incomplete: EntryWorkTable = withoutOne
    expect(Object.keys(incomplete)).not.toContain('awaitingChildren')
    // Final states end the run: no work; every live state has some.
    expect(
      Object.entries(ENTRY_WORK)
        .filter(([, work]) => work === null)
        .map(([state]) => state)
    ).toEqual(['finished.succeeded', 'finished.stepCapReached', 'finished.failed', 'finished.cancelled', 'finished.timedOut'])
  })

  it('stops the run failed with an internal error naming the state and the event when the machine ignores an event, and never calls the model twice for one dispatch', async () => {
    const dispatching = ENTRY_WORK.dispatching!
    let replaced = false
    // The first dispatch's answer comes back as an event `dispatching` does not take. Dropped,
    // the driver would re-enter `dispatching` and pay for a second call (the script answers it).
    const table: EntryWorkTable = {
      ...ENTRY_WORK,
      dispatching: {
        ...dispatching,
        run: (drive, ctx) =>
          Effect.map(later(dispatching.run(drive, ctx)), (work) => {
            if (work === undefined || replaced) return work
            replaced = true
            return { ...work, event: { type: 'CHILDREN_DONE' } }
          })
      }
    }
    const result = await driveRun([writeFile('a.txt', 'x'), { text: 'done' }], table)
    expect(result.provider.callCount()).toBe(1)
    expect(result.attempts).toHaveLength(1)
    expect(result.run.status).toBe('failed')
    expect(result.run.state).toBe('finished.failed')
    const error = JSON.parse(result.run.error_json!) as { kind: string; message: string }
    expect(error.kind).toBe('internal')
    expect(error.message).toContain('CHILDREN_DONE')
    expect(error.message).toContain('dispatching')
    expect(result.transitions).toEqual(['dispatching -FAIL-> finished.failed'])
  })

  it("leaves the run's row for later at every commit that changes no status within HEAD_REFRESH_MS of its last write, and writes it at the others", async () => {
    const deferred: boolean[] = []
    const recording = (writer: RunWriter): RunWriter => ({
      ...writer,
      commit: (commit, options) => {
        deferred.push(commit.headDeferred === true)
        return writer.commit(commit, options)
      }
    })
    const listDir: ScriptedStep = { toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] }
    // The drive's clock stands still: every commit is within HEAD_REFRESH_MS of the first.
    const result = await driveRun([...Array.from({ length: 8 }, () => listDir), { text: 'done' }], ENTRY_WORK, recording, 'test')
    expect(result.run).toMatchObject({ status: 'succeeded', state: 'finished.succeeded', steps: 9 })
    // The first commit writes the status `running`, the last `succeeded`; the 7 between leave the row.
    expect(deferred).toEqual([false, ...Array.from({ length: 7 }, () => true), false])
    expect(result.transitions).toHaveLength(26)
  })

  it('costs one commit for a step whose tools only read, and two for a write_file step: its reply with the journal entry "started", then its completed and results with the next receipt', async () => {
    const result = await driveRun([{ toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] }, writeFile('a.txt', 'x'), { text: 'done' }])
    expect(result.run.status).toBe('succeeded')
    expect(readFileSync(path.join(result.ws, 'a.txt'), 'utf8')).toBe('x')
    expect(result.calls).toEqual([
      // The run's first receipt, durable before the first call (later ones ride with a commit).
      { call: 'write', transitions: [], writes: ['insertAttempt 1'] },
      // Step 1 (list_dir): one commit holds its reply, its results and step 2's receipt.
      {
        call: 'commit',
        transitions: ['dispatching>acting', 'acting>verifying', 'verifying>dispatching'],
        writes: ['settleAttempt 1', 'insertStep 1', 'insertPolicyEvents', 'setStepResults 1', 'insertAttempt 2']
      },
      // Step 2 (write_file): the reply is durable, with the journal's `started`, before the
      // file is written ...
      { call: 'commit', transitions: ['dispatching>acting'], writes: ['settleAttempt 2', 'insertStep 2', 'startToolEffect 2'] },
      // ... and its `completed` and results (with the write's decision, `approval: auto`) go
      // with step 3's receipt: two commits.
      {
        call: 'commit',
        transitions: ['acting>verifying', 'verifying>dispatching'],
        writes: ['completeToolEffect 2', 'insertApproval', 'insertPolicyEvents', 'setStepResults 2', 'insertAttempt 3']
      },
      // Step 3 (no tools) and the end of the run: one commit.
      { call: 'commit', transitions: ['dispatching>verifying', 'verifying>finished.succeeded'], writes: ['settleAttempt 3', 'insertStep 3'] }
    ])
  })

  it("goes on only once a commit the store answers later is durable, and stops with the store's error at the first one it refuses, keeping nothing past it", async () => {
    const steps = (): ReadonlyArray<ScriptedStep> => [{ toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] }, { text: 'done' }]
    const deferred = (writer: RunWriter): RunWriter => ({
      ...writer,
      commit: (commit, options) => fencedCall('commit', () => Promise.resolve().then(() => runCall(writer.commit(commit, options))))
    })
    const later = await driveRun(steps(), ENTRY_WORK, deferred)
    const now = await driveRun(steps())
    expect(later.failure).toBeUndefined()
    expect(later.run.status).toBe('succeeded')
    expect(later.transitions).toEqual(now.transitions)

    let commits = 0
    const refusing = (writer: RunWriter): RunWriter => ({
      ...writer,
      commit: (commit, options) =>
        fencedCall('commit', () => (++commits === 2 ? Promise.reject(new LeaseLostError({ runId: commit.runId })) : runCall(writer.commit(commit, options))))
    })
    const refused = await driveRun(steps(), ENTRY_WORK, refusing)
    expect(refused.failure).toBeInstanceOf(LeaseLostError)
    // Only the first commit (step 1 and its tool) is in the store; step 2's reply never is.
    expect(refused.transitions).toEqual(now.transitions.slice(0, 3))
    expect(refused.run.status).toBe('running')
  })
})
