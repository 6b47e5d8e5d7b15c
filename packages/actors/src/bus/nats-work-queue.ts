import { jetstream } from '@nats-io/jetstream'
import type { NatsConnection } from '@nats-io/transport-node'
import { maskUrlCredentials } from '@agentvisor/core'
import { Effect, Schedule } from 'effect'
import type { BusChildQueue, ChildDelivery, ConsumeOptions } from '../protocol/bus.js'
import { BusError } from '../protocol/bus.js'
import { stderrLog, surviving } from '../loop/survive.js'
import { pullOne, serveMessage } from './nats-pull.js'
import { type WorkQueueConfig, workQueueSetup } from './nats-work-queue-setup.js'
import { encodeJson } from './wire.js'

// After a failed pull (server restarting, consumer deleted) a slot waits this long before
// retrying, doubling while it keeps failing, up to PULL_RETRY_MAX.
const PULL_RETRY_MS = 1_000
const PULL_RETRY_MAX = '30 seconds'

/** An error as one line, for messages that name what failed; a URL in it keeps no credentials. */
export const firstLine = (error: unknown): string => maskUrlCredentials((error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '')

/**
 * The child-run queue on JetStream: the work-queue stream and its durable consumer
 * (nats-work-queue-setup.ts), deduplicating resubmissions by message id = run id.
 * Each of a worker's `concurrency` slots holds one pull request of one message (nats-pull.ts), so
 * a worker never owns more requests than it can drive and an idle slot takes work as soon as it exists.
 */
export const makeNatsWorkQueue = (nc: NatsConnection, config: WorkQueueConfig): BusChildQueue => {
  const { streamName, consumerName, subject, ackWaitMs } = config
  const js = jetstream(nc)
  const setup = workQueueSetup(nc, config)

  const setUp = <A>(what: () => Promise<A>): Effect.Effect<A, BusError> =>
    Effect.tryPromise({
      try: what,
      catch: (cause) => new BusError({ message: `cannot set up the NATS work queue ${streamName}/${consumerName}: ${firstLine(cause)}`, cause })
    })

  const submitChild: BusChildQueue['submitChild'] = (request) =>
    Effect.gen(function* () {
      yield* setUp(setup.stream)
      const payload = encodeJson(request)
      if (payload === undefined) return yield* Effect.fail(new BusError({ message: `child run ${request.runId} cannot be encoded as JSON` }))
      yield* Effect.tryPromise({
        // The run id as message id: JetStream drops a resubmission within its duplicate window.
        try: () => js.publish(subject, payload, { msgID: request.runId }),
        catch: (cause) => new BusError({ message: `cannot submit child run ${request.runId}: ${firstLine(cause)}`, cause })
      })
    })

  const pullRetry = Schedule.exponential(PULL_RETRY_MS).pipe(Schedule.union(Schedule.spaced(PULL_RETRY_MAX)))

  // A slot outlives any failed pull: it is logged, and the slot pulls again on `pullRetry`.
  const slot = (handle: (delivery: ChildDelivery) => Effect.Effect<void, unknown>, options: ConsumeOptions): Effect.Effect<never> =>
    Effect.forever(
      surviving(
        `pull a child-run request from ${streamName}/${consumerName}`,
        Effect.gen(function* () {
          const source = yield* Effect.tryPromise(setup.consumer)
          return yield* pullOne(source)
        }).pipe(
          // The consumer may have been deleted under us: set it up again on the next pull.
          Effect.tapError(() => Effect.sync(setup.reset))
        ),
        options.log ?? stderrLog,
        pullRetry
      ).pipe(Effect.flatMap((message) => (message === undefined ? Effect.void : serveMessage(message, ackWaitMs, handle, options))))
    )

  const consumeChildren: BusChildQueue['consumeChildren'] = (handle, options) =>
    Effect.gen(function* () {
      const { concurrency } = options
      if (!Number.isInteger(concurrency) || concurrency < 1) {
        return yield* Effect.fail(new BusError({ message: `concurrency must be a positive integer, got ${concurrency}` }))
      }
      yield* setUp(setup.consumer)
      yield* Effect.forkScoped(
        Effect.all(
          Array.from({ length: concurrency }, () => slot(handle, options)),
          { concurrency: 'unbounded', discard: true }
        )
      )
    })

  // The stream made or found, as a worker's first pull would: a server without JetStream answers no one.
  const checkWorkQueue: BusChildQueue['checkWorkQueue'] = Effect.tryPromise({
    try: () => setup.stream(),
    catch: (cause) =>
      new BusError({
        message: `the NATS server has no usable JetStream work queue ${streamName} (is JetStream enabled, -js?): ${cause instanceof Error ? cause.message.split('\n')[0] : String(cause)}`,
        cause
      })
  }).pipe(Effect.asVoid)

  return { submitChild, consumeChildren, checkWorkQueue }
}
