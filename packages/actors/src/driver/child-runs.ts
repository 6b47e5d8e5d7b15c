import { DEFAULT_CHILD_LIMITS, type TaskContract, type ToolCall } from '@agentvisor/core'
import {
  type Database,
  isFinalStatus,
  type LeaseLostError,
  listChildren,
  listSteps,
  requestCancel,
  type RunRow,
  type RunWithContract,
  type StepRow,
  type StoreError
} from '@agentvisor/store'
import { Duration, Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import type { CallPlan } from '../approval/step-plan.js'
import type { Bus } from '../protocol/bus.js'
import { PROTOCOL_VERSION } from '../protocol/messages.js'
import type { RunEvent } from '../machine/run-machine.js'
import { storedOutput } from './conversation.js'
import { iso, nowMs } from './now.js'
import { isUndriven } from '../io/run-cancel.js'
import { childContract, childRunId } from '../protocol/child-contract.js'
import { causeLine, type LogLine, stderrLog, surviving } from '../loop/survive.js'

/** A `spawn_child` call's answer, once its child ended (or it was refused). */
export interface SpawnResult {
  readonly ok: boolean
  readonly output: string
}

/** What a step's `spawn_child` calls need: answers by call position, children to create, whether to wait. */
export interface SpawnPlan {
  readonly results: ReadonlyMap<number, SpawnResult>
  readonly newChildren: ReadonlyArray<{ readonly id: string; readonly contract: TaskContract }>
  /** Some child of the step has not ended yet: the run waits in `awaitingChildren`. */
  readonly unfinished: boolean
}

/** A call the run's children answer: one of a tool that runs as a child run (`spawn_child`). */
const startsChild = (item: CallPlan): item is Extract<CallPlan, { kind: 'run' }> => item.kind === 'run' && item.tool?.runsAs === 'child-run'

/**
 * What the parent's model is told of a finished child: in a task with agents, JSON `{runId,
 * status, steps, output, error?}` with the child's output (docs/agents.md, "Delegation"); in a
 * first-edition task, a line of text with its last answer.
 */
const describeChild = (parent: TaskContract, child: RunWithContract, steps: ReadonlyArray<StepRow>): string => {
  if (parent.agents === undefined) return describeChildText(child, [...steps].reverse().find((row) => row.text !== '')?.text ?? '')
  const output = child.status === 'succeeded' ? storedOutput(steps) : undefined
  return JSON.stringify({
    runId: child.id,
    status: child.status,
    steps: child.steps,
    output: output ?? null,
    ...(child.error !== null ? { error: { kind: child.error.kind, message: child.error.message } } : {})
  })
}

const describeChildText = (child: RunRow, lastText: string): string => {
  const error = child.error === null ? '' : ` (${child.error.kind}: ${child.error.message})`
  const said = lastText === '' ? '' : `\nIts last answer: ${lastText}`
  return `Child run ${child.id} ${child.status} after ${child.steps} step${child.steps === 1 ? '' : 's'}${error}.${said}`
}

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

/**
 * A run's children: planning a step's `spawn_child` calls, waiting for them in
 * `awaitingChildren`, and cancelling them with their parent.
 */
export const makeChildRuns = (env: {
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
}): ChildRuns => {
  const { db, runId, contract, bus } = env
  const warn = env.warn ?? stderrLog
  const limits = contract.children ?? DEFAULT_CHILD_LIMITS
  // A run may start children while it is shallower than the tree's depth cap, and only with a bus.
  const canSpawn = bus !== undefined && (contract.lineage?.depth ?? 0) < limits.maxDepth

  /** Answers finished or refused spawns; lists the children to create (ids derive from the call). */
  const planSpawns = (calls: ReadonlyArray<CallPlan>, step: number): Effect.Effect<SpawnPlan, StoreError | LeaseLostError> =>
    Effect.gen(function* () {
      const results = new Map<number, SpawnResult>()
      const newChildren: Array<{ id: string; contract: TaskContract }> = []
      let unfinished = false
      // Most steps spawn nothing: only a step that does reads its children.
      if (!calls.some(startsChild)) return { results, newChildren, unfinished }
      const existing = new Map((yield* listChildren(db, runId)).map((c) => [c.id, c]))
      let ordinal = existing.size
      for (const [position, item] of calls.entries()) {
        if (!startsChild(item)) continue
        if (!canSpawn) {
          results.set(position, {
            ok: false,
            output: `spawn_child is not available to this run (depth ${contract.lineage?.depth ?? 0} of at most ${limits.maxDepth}).`
          })
          continue
        }
        const id = childRunId(runId, step, position)
        const child = existing.get(id)
        if (child !== undefined) {
          if (isFinalStatus(child.status)) {
            const steps = yield* listSteps(db, id)
            results.set(position, { ok: child.status === 'succeeded', output: describeChild(contract, child, steps) })
          } else {
            unfinished = true
          }
          continue
        }
        if (ordinal >= limits.maxChildren) {
          results.set(position, { ok: false, output: `Refused: this run may start at most ${limits.maxChildren} child runs.` })
          continue
        }
        ordinal += 1
        const made = childContract(contract, runId, item.call.arguments, ordinal)
        if (Either.isLeft(made)) {
          results.set(position, { ok: false, output: made.left })
          continue
        }
        newChildren.push({ id, contract: made.right })
        unfinished = true
      }
      return { results, newChildren, unfinished }
    })

  /** This step's children, in spawn order. */
  const stepChildren = (step: number): Effect.Effect<RunWithContract[], StoreError | LeaseLostError> =>
    Effect.map(listChildren(db, runId), (rows) => {
      const order = new Map(env.toolCalls().map((_, position) => [childRunId(runId, step, position), position]))
      return rows.filter((r) => order.has(r.id)).sort((a, b) => order.get(a.id)! - order.get(b.id)!)
    })

  /**
   * Waits until every child of the step has ended. Children are handed to the bus in spawn
   * order, at most `maxConcurrent` at a time (the rest wait their turn); submitting is
   * idempotent, so a resumed parent re-attaches to children that are still queued or running.
   * Done messages wake the wait early; the store is the truth, so a missed message never hangs it.
   * A store query or a submission that fails is logged and tried again: the wait goes on (until
   * the run's deadline) instead of letting the run go.
   */
  const awaitChildren = (step: number): Effect.Effect<{ readonly event: RunEvent }, StoreError | LeaseLostError> =>
    Effect.gen(function* () {
      if (bus === undefined) return { event: { type: 'FAIL', error: { kind: 'internal', message: 'child runs need a bus' } } as RunEvent }
      const submitted = new Set<string>()
      const wake = yield* Effect.makeSemaphore(0)
      // Without done messages the wait still ends: it polls the store.
      yield* Effect.forkScoped(
        bus
          .watchDone(() => Effect.runSync(wake.release(1)))
          .pipe(Effect.catchAll((error) => Effect.sync(() => warn(`run ${runId}: no done messages, polling only: ${error.message}`))))
      )
      for (;;) {
        const rows = yield* surviving(`run ${runId}: load its children`, stepChildren(step), warn)
        const open = rows.filter((r) => !isFinalStatus(r.status))
        if (open.length === 0) return { event: { type: 'CHILDREN_DONE' } as RunEvent }
        const running = open.filter((r) => submitted.has(r.id)).length
        for (const child of open.filter((r) => !submitted.has(r.id)).slice(0, Math.max(0, limits.maxConcurrent - running))) {
          // One that cannot be handed to the bus now is handed again on the next look.
          const traceparent = env.traceparent?.()
          const request = {
            v: PROTOCOL_VERSION,
            runId: child.id,
            parentId: runId,
            contract: child.contract,
            ...(traceparent !== undefined ? { traceparent } : {})
          }
          const handed = yield* bus.submitChild(request).pipe(
            Effect.as(true),
            Effect.catchAllCause((cause) =>
              Effect.as(
                Effect.sync(() => warn(`run ${runId}: cannot submit child run ${child.id}, trying again: ${causeLine(cause)}`)),
                false
              )
            )
          )
          if (handed) submitted.add(child.id)
        }
        yield* Effect.race(wake.take(1), Effect.sleep(Duration.millis(500)))
      }
    }).pipe(Effect.scoped)

  /** Cancels the run's unfinished children (store first, then the bus for remote drivers). */
  const cancelChildren: Effect.Effect<void> = Effect.gen(function* () {
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
      if (env.endUndriven !== undefined && isUndriven(child, yield* nowMs)) yield* env.endUndriven(child.id)
    }
  })

  return { canSpawn, planSpawns, awaitChildren, cancelChildren }
}
