import type { Executor, StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import { RunNotFoundError } from '../errors.js'
import { loadRunTrace, type RunTrace } from '../trace/run-trace.js'

/**
 * A run's whole trace, exactly the object `agentvisor show RUN --json` prints (docs/cli.md): what
 * `Agentvisor.trace`, `agentvisor show` and the inspector share. Fails with `RunNotFoundError`
 * for an unknown id, `StoreError` when the store cannot be read or a row of the run is corrupt
 * (docs/durability.md, "Corrupt rows").
 *
 * @example
 * const trace = await Effect.runPromise(runTrace(store.db, runId))
 */
export const runTrace = (db: Executor, runId: string): Effect.Effect<RunTrace, RunNotFoundError | StoreError> =>
  Effect.flatMap(loadRunTrace(db, runId), (trace) => (trace === undefined ? Effect.fail(new RunNotFoundError({ runId })) : Effect.succeed(trace)))
