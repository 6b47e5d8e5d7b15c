import type { ChildLimits, ToolCall } from '@agentvisor/core'
import { type Database, isFinalStatus, type LeaseLostError, listChildren, type RunWithContract, type StoreError } from '@agentvisor/store'
import { Duration, Effect } from 'effect'
import type { Kysely } from 'kysely'
import { causeLine, type LogLine, surviving } from '../loop/survive.js'
import type { RunEvent } from '../machine/run-machine.js'
import type { Bus } from '../protocol/bus.js'
import { childRunId } from '../protocol/child-contract.js'
import { PROTOCOL_VERSION } from '../protocol/messages.js'

/** What waiting for a step's children reads (child-runs.ts). */
export interface ChildWait {
  readonly db: Kysely<Database>
  readonly runId: string
  readonly bus: Bus | undefined
  readonly limits: ChildLimits
  readonly warn: LogLine
  /** The tool calls of the step being acted on: the step's children are theirs, in their order. */
  readonly toolCalls: () => ReadonlyArray<ToolCall>
  /** The W3C trace context of the run's current span, handed to its children on the bus (docs/telemetry.md). */
  readonly traceparent?: (() => string | undefined) | undefined
}

/** This step's children, in spawn order. */
const stepChildren = (wait: ChildWait, step: number): Effect.Effect<RunWithContract[], StoreError | LeaseLostError> => {
  const { db, runId } = wait
  return Effect.map(listChildren(db, runId), (rows) => {
    const order = new Map(wait.toolCalls().map((_, position) => [childRunId(runId, step, position), position]))
    return rows.filter((r) => order.has(r.id)).sort((a, b) => order.get(a.id)! - order.get(b.id)!)
  })
}

/**
 * Waits until every child of the step has ended. Children are handed to the bus in spawn
 * order, at most `maxConcurrent` at a time (the rest wait their turn); submitting is
 * idempotent, so a resumed parent re-attaches to children that are still queued or running.
 * Done messages wake the wait early; the store is the truth, so a missed message never hangs it.
 * A store query or a submission that fails is logged and tried again: the wait goes on (until
 * the run's deadline) instead of letting the run go.
 */
export const awaitChildren = (wait: ChildWait, step: number): Effect.Effect<{ readonly event: RunEvent }, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    const { runId, bus, limits, warn } = wait
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
      const rows = yield* surviving(`run ${runId}: load its children`, stepChildren(wait, step), warn)
      const open = rows.filter((r) => !isFinalStatus(r.status))
      if (open.length === 0) return { event: { type: 'CHILDREN_DONE' } as RunEvent }
      const running = open.filter((r) => submitted.has(r.id)).length
      for (const child of open.filter((r) => !submitted.has(r.id)).slice(0, Math.max(0, limits.maxConcurrent - running))) {
        // One that cannot be handed to the bus now is handed again on the next look.
        const traceparent = wait.traceparent?.()
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
