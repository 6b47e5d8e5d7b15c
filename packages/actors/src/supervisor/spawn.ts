import { ContractError, type TaskContract } from '@agentvisor/core'
import { type Database, getRun, getRunRow, insertRun, listChildren, newRunId, recordedUsage, StoreError } from '@agentvisor/store'
import { Clock, Duration, Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import type { Bus } from '../protocol/bus.js'
import { PROTOCOL_VERSION } from '../protocol/messages.js'
import { RunNotFoundError } from '../errors.js'
import { surviving } from '../loop/survive.js'
import type { ChildSpec, RunHandle, RunResult, SpawnChild } from './run-handle.js'
import { requestRunCancel } from '../io/run-cancel.js'

/** A run whose driver never let it go with a tally (it never called a model) cost nothing. */
const NO_USAGE = { inputTokens: 0, outputTokens: 0 } as const
import { childContract, childRunRow } from '../protocol/child-contract.js'

/**
 * Starting a child of a run from code (what `spawn_child` does for a model): the parent's
 * providers and policy, narrowed limits, a workspace inside the parent's. The child runs
 * wherever the bus sends it; its handle waits on the store, the truth wherever it runs.
 */
export const makeSpawn = (deps: {
  readonly db: Kysely<Database>
  readonly bus: Bus | undefined
  readonly warn: (line: string) => void
}): Effect.Effect<SpawnChild> =>
  Effect.gen(function* () {
    const { db, bus, warn } = deps
    // Children are numbered by how many their parent has: spawns are taken one at a time.
    const spawnLock = yield* Effect.makeSemaphore(1)
    const insertChild = (runId: string, parentId: string, contract: TaskContract, at: string) => insertRun(db, childRunRow(runId, parentId, contract, at))
    return (parentId: string, spec: ChildSpec): Effect.Effect<RunHandle, StoreError | RunNotFoundError | ContractError> =>
      Effect.gen(function* () {
        if (bus === undefined) return yield* new ContractError({ message: 'child runs need a bus' })
        const parent = yield* getRun(db, parentId)
        if (parent === undefined) return yield* new RunNotFoundError({ runId: parentId })
        const parentContract = parent.contract
        const now = yield* Clock.currentTimeMillis
        const runId = newRunId(now)
        const at = new Date(now).toISOString()
        const made = yield* spawnLock.withPermits(1)(
          Effect.gen(function* () {
            const siblings = yield* listChildren(db, parentId)
            const contract = childContract(parentContract, parentId, JSON.stringify(spec), siblings.length + 1)
            if (Either.isLeft(contract)) return yield* new ContractError({ message: contract.left })
            yield* insertChild(runId, parentId, contract.right, at)
            return contract
          })
        )
        yield* bus
          .submitChild({ v: PROTOCOL_VERSION, runId, parentId, contract: made.right })
          .pipe(Effect.mapError((error) => new StoreError({ message: `cannot hand the child to the bus: ${error.message}`, cause: error })))
        const ended = (status: string) => status !== 'running'
        // The store is the truth wherever the child runs: wait on it.
        const result: Effect.Effect<RunResult> = Effect.gen(function* () {
          for (;;) {
            // A store that fails is logged and asked again on a schedule; the wait goes on.
            const row = yield* surviving(`wait for child run ${runId}`, getRunRow(db, runId), warn)
            if (row !== undefined && ended(row.status)) {
              return {
                runId,
                status: row.status,
                steps: row.steps,
                // What its driver wrote when it let the run go (docs/task-file.md, "Usage and budgets").
                usage: recordedUsage(row.usage_json) ?? NO_USAGE,
                ...(row.error !== null ? { error: row.error } : {})
              }
            }
            yield* Effect.sleep(Duration.millis(200))
          }
        })
        const cancel = Effect.gen(function* () {
          // The store first (docs/durability.md: the request outlives any message), then the bus,
          // whose control handler ends the child if nobody drives it.
          yield* requestRunCancel(db, runId).pipe(Effect.catchAll((error) => Effect.sync(() => warn(`cannot cancel child run ${runId}: ${error.message}`))))
          // Nobody answering (the child is queued, or its worker is gone) is not a failure: the
          // request in the store reaches whoever drives it next.
          yield* bus.control(runId, 'cancel', { v: PROTOCOL_VERSION }, 2000).pipe(Effect.ignore)
        })
        return { runId, result, cancel } satisfies RunHandle
      })
  })
