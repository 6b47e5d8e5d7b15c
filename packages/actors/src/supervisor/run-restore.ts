import type { TaskContract } from '@agentvisor/core'
import { clearCancelRequest, type Database, isFinalStatus, type LeaseLostError, type RunWriter, type StoreError } from '@agentvisor/store'
import { Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import type { Actor } from 'xstate'
import type { StepRecord } from '../driver/conversation.js'
import { FollowUpRefusedError, RunNotFoundError, RunNotResumableError } from '../errors.js'
import { machineInput, type runMachine } from '../machine/run-machine.js'
import { decodeRunSnapshot } from '../machine/run-snapshot.js'
import { restoredActor } from './run-actors.js'
import type { StartOptions } from './run-handle.js'
import type { SupervisorOptions } from './supervisor-options.js'

/** A stored run made ready to be driven again (launch-run.ts `resume`). */
export interface RestoredRun {
  readonly contract: TaskContract
  /** Restored from its last snapshot; a fresh one for a run interrupted before its first transition. */
  readonly actor: Actor<typeof runMachine>
  readonly steps: ReadonlyArray<StepRecord>
  /** Its last transition's seq (0 when it has none). */
  readonly seq: number
  readonly createdAt: string
  /** A cancel requested while nobody drove it: the drive ends the run at once. */
  readonly cancelRequested: boolean
}

/** What restoring a run needs from its supervisor. */
export interface RestoreDeps {
  readonly db: Kysely<Database>
  readonly writer: RunWriter
  readonly options: SupervisorOptions
  /** The actor of a run that starts afresh (run-actors.ts `freshActors`). */
  readonly newActor: (contract: TaskContract, runId: string) => Actor<typeof runMachine>
}

/**
 * Loads run `runId` and restores its actor from its last snapshot. A follow-up (`startOptions.followUp`)
 * continues only a finished run with a conversation, and clears the cancel that ended the last turn.
 * The contract and steps come decoded: a corrupt one failed the load (docs/durability.md, "Corrupt rows").
 */
export const restoreRun = (
  deps: RestoreDeps,
  runId: string,
  startOptions: StartOptions
): Effect.Effect<RestoredRun, StoreError | LeaseLostError | RunNotFoundError | FollowUpRefusedError | RunNotResumableError> =>
  Effect.gen(function* () {
    const { db, writer, options, newActor } = deps
    const loaded = yield* writer.loadRun(runId)
    if (loaded === undefined) return yield* new RunNotFoundError({ runId })
    const { run, last, steps } = loaded
    const { contract } = run
    if (startOptions.followUp !== undefined) {
      // A follow-up continues a finished run that has a conversation to continue.
      if (!isFinalStatus(run.status)) return yield* new FollowUpRefusedError({ runId, reason: `it is ${run.status}: a follow-up continues a finished run` })
      if (steps.length === 0) return yield* new FollowUpRefusedError({ runId, reason: 'no model answer was ever recorded for it: start a new run' })
      // A cancel that ended the last turn does not end the next one.
      if (run.cancel_requested_at !== null) yield* clearCancelRequest(db, runId)
    }
    const decoded = last === undefined ? Either.right(undefined) : decodeRunSnapshot(last.snapshot_json, machineInput(contract))
    if (Either.isLeft(decoded)) return yield* new RunNotResumableError({ runId, reason: `its last snapshot ${decoded.left}` })
    const snapshot = decoded.right
    const actor = yield* Effect.try({
      try: () =>
        // A run interrupted before its first transition has no snapshot: it starts afresh.
        snapshot === undefined ? newActor(contract, runId) : restoredActor(options, contract, runId, snapshot),
      catch: () => new RunNotResumableError({ runId, reason: 'its last snapshot does not fit the run machine' })
    })
    return {
      contract,
      actor,
      steps: steps.map(
        (row): StepRecord => ({
          text: row.text,
          toolCalls: row.tool_calls,
          results: row.results ?? undefined,
          feedback: row.feedback ?? undefined
        })
      ),
      seq: last?.seq ?? 0,
      createdAt: run.created_at,
      cancelRequested: run.cancel_requested_at !== null && startOptions.followUp === undefined
    }
  })
