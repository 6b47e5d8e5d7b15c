import type { Database } from '@agentvisor/store'
import { Effect, type Scope } from 'effect'
import type { Kysely } from 'kysely'
import type { Bus } from '../protocol/bus.js'
import { causeLine, surviving } from '../loop/survive.js'
import { giveUpChild, handleChildDelivery } from '../worker/child-worker.js'
import { makeControlHandler } from '../worker/control-handler.js'
import { makeSubmitHandler } from '../submit/submit-handler.js'
import { isLeaseConflict } from '../supervisor/lease.js'
import type { LaunchError, RunHandle, StartOptions } from '../supervisor/run-handle.js'
import type { SupervisorOptions } from '../supervisor/supervisor-options.js'

/**
 * What a supervisor serves from its bus, each as a loop in its scope: child runs to drive (a
 * worker, `serveChildren`) and control requests to answer (`serveControl`).
 */
export const serveBus = (deps: {
  readonly db: Kysely<Database>
  readonly bus: Bus | undefined
  readonly options: SupervisorOptions
  readonly resume: (runId: string, startOptions?: StartOptions) => Effect.Effect<RunHandle, LaunchError>
  readonly warn: (line: string) => void
}): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { db, bus, options, resume, warn } = deps
    if (bus !== undefined && options.serveChildren !== undefined) {
      const { concurrency } = options.serveChildren
      // A bus that cannot be reached yet (NATS restarting) is tried again, not given up on; a
      // concurrency that can never work is said once.
      if (!Number.isInteger(concurrency) || concurrency < 1) {
        warn(`cannot consume child runs: concurrency must be a positive integer, got ${concurrency}`)
      } else {
        yield* Effect.forkScoped(
          surviving(
            'consume child runs',
            bus.consumeChildren((delivery) => handleChildDelivery({ db, resume, log: options.log ?? warn }, delivery), {
              concurrency,
              log: warn,
              giveUp: (request, cause) => giveUpChild(db, request, cause)
            }),
            warn
          )
        )
      }
    }
    if (bus !== undefined && options.serveSubmit !== undefined) {
      const handler = makeSubmitHandler({ db, bus, template: options.serveSubmit.template, log: options.log ?? warn })
      yield* Effect.forkScoped(surviving('take submitted runs', bus.serveSubmit(handler, { log: warn }), warn))
    }
    if (bus !== undefined && options.serveControl === true) {
      const log = options.log ?? (() => {})
      // Runs resumed for a control request go on in the background, like any other run, and are
      // logged like the runs a worker takes from the queue.
      const drive = (runId: string) =>
        void Effect.runFork(
          resume(runId).pipe(
            Effect.tap(() => Effect.sync(() => log(`run ${runId} started (resumed after a control request)`))),
            Effect.flatMap((h) => h.result),
            Effect.tap((result) => Effect.sync(() => log(`run ${runId} ${result.status}`))),
            Effect.catchAllCause((cause) =>
              isLeaseConflict(cause) ? Effect.void : Effect.sync(() => warn(`cannot resume run ${runId} for a control request: ${causeLine(cause)}`))
            )
          )
        )
      yield* Effect.forkScoped(surviving('serve control requests', bus.serveControl(makeControlHandler({ db, drive, log: warn }), { log: warn }), warn))
    }
  })
