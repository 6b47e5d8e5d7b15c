import { type Database, isStoreOutage, LeaseConflictError, StoreError } from '@agentvisor/store'
import { Effect, Either, Schedule } from 'effect'
import { type Kysely, sql } from 'kysely'
import { oneLine } from '../loop/one-line.js'
import { loopRetry } from '../loop/survive.js'
import type { LaunchError, RunHandle, RunResult } from './run-handle.js'

/**
 * A run a store outage interrupted here (past `storeOutageMs`), resumed here once the store
 * answers again (docs/durability.md, "A store outage"): what a worker does with the runs it
 * holds. The store is probed meanwhile with a capped, jittered backoff; a store that fails
 * again on the resume starts the wait over; a run another driver took meanwhile is left to it.
 */
export const makeOutageResume = (
  db: Kysely<Database>,
  warn: (line: string) => void,
  resume: (runId: string) => Effect.Effect<RunHandle, LaunchError>
): ((runId: string, interrupted: RunResult) => Effect.Effect<RunResult>) => {
  const storeAnswers = storeAnswersOf(db)
  const resumeAfterOutage = (runId: string, interrupted: RunResult): Effect.Effect<RunResult> =>
    Effect.gen(function* () {
      warn(`run ${runId} is interrupted by the store outage; it is resumed here once the store answers again`)
      yield* storeAnswers
      warn(`the store answers again: resuming run ${runId}`)
      const resumed = yield* Effect.either(resume(runId))
      if (Either.isRight(resumed)) return yield* resumed.right.result
      const error = resumed.left
      if (error instanceof StoreError && isStoreOutage(error)) return yield* resumeAfterOutage(runId, interrupted)
      if (error instanceof LeaseConflictError) warn(`run ${runId} is driven by ${error.owner} now; it is left to that driver`)
      else warn(`cannot resume run ${runId} after the store outage: ${oneLine(error.message)}`)
      return interrupted
    })
  return resumeAfterOutage
}

/** How often a store that is away is asked again: 100 ms doubling to 5 s apart, jittered. */
const PROBE_SCHEDULE = loopRetry.pipe(Schedule.jittered)

/** Succeeds once the store answers a query (`select 1`); until then, asks again on `PROBE_SCHEDULE`. */
const storeAnswersOf = (db: Kysely<Database>): Effect.Effect<void> =>
  Effect.retry(
    Effect.tryPromise(() => sql`select 1`.execute(db)),
    PROBE_SCHEDULE
  ).pipe(Effect.asVoid, Effect.orDie)
