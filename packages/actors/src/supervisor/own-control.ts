import { Effect, type Fiber } from 'effect'
import type { ControlHandler } from '../protocol/bus.js'
import type { SupervisorOptions } from './supervisor-options.js'

/**
 * Serves NATS control requests for one run this process drives (`serveOwnControl`), until the
 * returned fiber is interrupted; undefined when it does not. A decision taken here is recorded;
 * a run paused on it is driven on by a worker or `resume` (this drive has let go of it by then).
 */
export const ownControlServer =
  (options: SupervisorOptions, handler: ControlHandler, warn: (line: string) => void) =>
  (runId: string): Fiber.RuntimeFiber<void> | undefined => {
    const bus = options.bus
    if (options.serveOwnControl !== true || bus === undefined || bus.kind !== 'nats') return undefined
    // Best effort, as every publication: a bus that cannot subscribe leaves the workers to answer.
    return Effect.runFork(Effect.ignore(Effect.scoped(Effect.zipRight(bus.serveControl(handler, { runId, log: warn }), Effect.never))))
  }
