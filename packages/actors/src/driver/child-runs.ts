import { type ChildLimits, DEFAULT_CHILD_LIMITS, type TaskContract, type ToolCall } from '@agentvisor/core'
import { type Database, isFinalStatus, type LeaseLostError, listChildren, requestCancel, type RunRow, type StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Kysely } from 'kysely'
import type { CallPlan } from '../approval/step-plan.js'
import type { Bus } from '../protocol/bus.js'
import { PROTOCOL_VERSION } from '../protocol/messages.js'
import type { RunEvent } from '../machine/run-machine.js'
import { iso, nowMs } from './now.js'
import { isUndriven } from '../io/run-cancel.js'
import { type LogLine, stderrLog } from '../loop/survive.js'
import { planSpawns, type SpawnPlan } from './child-spawns.js'
import { awaitChildren } from './child-wait.js'

/** A run's children, as the driver's modules use them (driver/children.ts, tool-execution.ts). */
export interface ChildRuns {
  /** The run may start children: it has a bus and is shallower than the tree's depth cap. */
  readonly canSpawn: boolean
  /** Starts a step's `spawn_child` calls (each once, a resume finding those it started). */
  readonly planSpawns: (calls: ReadonlyArray<CallPlan>, step: number) => Effect.Effect<SpawnPlan, StoreError | LeaseLostError>
  /** Waits in `awaitingChildren` until the step's children ended, and tells the machine. */
  readonly awaitChildren: (step: number) => Effect.Effect<{ readonly event: RunEvent }, StoreError | LeaseLostError>
  /** Cancels the run's live children with it. */
  readonly cancelChildren: Effect.Effect<void>
}

/** What a run's children are made from: the run, its bus, and how its driver reaches them. */
export interface ChildRunsEnv {
  readonly db: Kysely<Database>
  readonly runId: string
  readonly contract: TaskContract
  readonly bus: Bus | undefined
  /** The tool calls of the step being acted on. */
  readonly toolCalls: () => ReadonlyArray<ToolCall>
  /**
   * Ends a child whose cancel is requested when no driver holds it (paused for a decision, or
   * queued): nobody else would ever write its final transition. A child driven elsewhere is left
   * to its driver, which hears of the request through its lease keeper.
   */
  readonly endUndriven?: ((childId: string) => Effect.Effect<void>) | undefined
  /** Where the wait logs the failures it survives (default stderr). */
  readonly warn?: LogLine | undefined
  /** The W3C trace context of the run's current span, handed to its children on the bus (docs/telemetry.md). */
  readonly traceparent?: (() => string | undefined) | undefined
}

/** A run's children with their limits, as the modules of child runs read them (child-spawns.ts, child-wait.ts). */
interface Children extends ChildRunsEnv {
  readonly limits: ChildLimits
  readonly canSpawn: boolean
  readonly warn: LogLine
}

/**
 * A run's children: planning a step's `spawn_child` calls (child-spawns.ts), waiting for them in
 * `awaitingChildren` (child-wait.ts), and cancelling them with their parent.
 */
export const makeChildRuns = (env: ChildRunsEnv): ChildRuns => {
  const limits = env.contract.children ?? DEFAULT_CHILD_LIMITS
  const children: Children = {
    ...env,
    limits,
    // A run may start children while it is shallower than the tree's depth cap, and only with a bus.
    canSpawn: env.bus !== undefined && (env.contract.lineage?.depth ?? 0) < limits.maxDepth,
    warn: env.warn ?? stderrLog
  }
  return {
    canSpawn: children.canSpawn,
    planSpawns: (calls, step) => planSpawns(children, calls, step),
    awaitChildren: (step) => awaitChildren(children, step),
    cancelChildren: cancelChildren(children)
  }
}

/** Cancels the run's unfinished children (store first, then the bus for remote drivers). */
const cancelChildren = (children: Children): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { db, runId, bus, warn } = children
    // A parent ending on a failing store cannot reach its children; it says so rather than
    // leaving them to run on unnoticed (they end at their own deadlines).
    const rows = yield* listChildren(db, runId).pipe(
      Effect.catchAll((error) =>
        Effect.as(
          Effect.sync(() => warn(`run ${runId}: cannot cancel its children: ${error.message}`)),
          [] as RunRow[]
        )
      )
    )
    const at = iso(yield* nowMs)
    for (const child of rows.filter((r) => !isFinalStatus(r.status))) {
      yield* requestCancel(db, child.id, at).pipe(
        Effect.catchAll((error) => Effect.sync(() => warn(`run ${runId}: cannot cancel child run ${child.id}: ${error.message}`)))
      )
      // Nobody answering is no failure: the request in the store reaches the child's next driver.
      if (bus !== undefined) yield* bus.control(child.id, 'cancel', { v: PROTOCOL_VERSION }, 2000).pipe(Effect.ignore)
      if (children.endUndriven !== undefined && isUndriven(child, yield* nowMs)) yield* children.endUndriven(child.id)
    }
  })
