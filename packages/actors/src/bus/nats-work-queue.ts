import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream'
import { AckPolicy, DeliverPolicy, jetstream, JetStreamApiError, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream'
import type { NatsConnection } from '@nats-io/transport-node'
import { nanos } from '@nats-io/transport-node'
import { maskUrlCredentials } from '@agentvisor/core'
import { Effect, Either, Schedule } from 'effect'
import type { Bus, ChildDelivery, ConsumeOptions } from '../protocol/bus.js'
import { BusError, serveDelivery } from '../protocol/bus.js'
import { stderrLog, surviving } from '../loop/survive.js'
import { bytesToText, decodeChildRequest, encodeJson } from './wire.js'

/** Where child-run requests wait: one work-queue stream and one durable consumer all workers share. */
export interface WorkQueueConfig {
  readonly streamName: string
  readonly consumerName: string
  readonly subject: string
  readonly ackWaitMs: number
}

/** The JetStream half of the NATS bus. */
export interface NatsWorkQueue {
  readonly submit: Bus['submitChild']
  readonly consume: Bus['consumeChildren']
  readonly check: Bus['checkWorkQueue']
}

// JetStream's "stream name already in use with a different configuration".
const STREAM_NAME_IN_USE = 10058
// How long one pull request waits at the server before the slot asks again (the client's default).
const PULL_EXPIRES_MS = 30_000
// After a failed pull (server restarting, consumer deleted) a slot waits this long before
// retrying, doubling while it keeps failing, up to PULL_RETRY_MAX.
const PULL_RETRY_MS = 1_000
const PULL_RETRY_MAX = '30 seconds'

/** An error as one line, for messages that name what failed; a URL in it keeps no credentials. */
export const firstLine = (error: unknown): string => maskUrlCredentials((error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '')

/** Remembers a set-up that succeeded; one that failed is tried again on the next use. */
const memoize = <A>(make: () => Promise<A>): { readonly get: () => Promise<A>; readonly reset: () => void } => {
  let pending: Promise<A> | undefined
  return {
    get: () =>
      (pending ??= make().catch((error: unknown) => {
        pending = undefined
        throw error
      })),
    reset: () => {
      pending = undefined
    }
  }
}

// Acks and naks are fire-and-forget publishes; on a closed connection they throw, and then the
// ack deadline decides instead.
const quietly = (f: () => void): Effect.Effect<void> =>
  Effect.sync(() => {
    try {
      f()
    } catch {
      // see above
    }
  })

/**
 * The child-run queue on JetStream: a work-queue stream on the start subject, created or
 * updated on first use (several workers may race to create it), deduplicating resubmissions by
 * message id = run id; one durable pull consumer with explicit acks and unlimited redelivery
 * (a request comes back as long as its worker dies; one whose handling keeps failing is
 * terminated by `serveDelivery` instead).
 * Each of a worker's `concurrency` slots holds one pull request of one message, so a worker
 * never owns more requests than it can drive and an idle slot takes work as soon as it exists.
 */
export const makeNatsWorkQueue = (nc: NatsConnection, config: WorkQueueConfig): NatsWorkQueue => {
  const { streamName, consumerName, subject, ackWaitMs } = config
  const js = jetstream(nc)

  const stream = memoize(async () => {
    const jsm = await jetstreamManager(nc)
    try {
      await jsm.streams.add({ name: streamName, subjects: [subject], retention: RetentionPolicy.Workqueue, storage: StorageType.File })
      return jsm
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE)) throw error
    }
    // It exists with another configuration (an operator's limits, another version of us): use
    // it if it is a work queue, adding our subject if it lacks it.
    const info = await jsm.streams.info(streamName)
    if (info.config.retention !== RetentionPolicy.Workqueue) {
      throw new Error(`stream ${streamName} exists with ${info.config.retention} retention, not a work queue`)
    }
    if (!info.config.subjects.includes(subject)) await jsm.streams.update(streamName, { subjects: [...info.config.subjects, subject] })
    return jsm
  })

  const consumer = memoize(async (): Promise<Consumer> => {
    const jsm = await stream.get()
    const ackWait = nanos(ackWaitMs)
    try {
      await jsm.consumers.add(streamName, {
        durable_name: consumerName,
        ack_policy: AckPolicy.Explicit,
        ack_wait: ackWait,
        max_deliver: -1,
        deliver_policy: DeliverPolicy.All
      })
    } catch (error) {
      // Servers from 2.10 refuse to "create" an existing durable with another ack wait (2.9
      // updates it); the durable is shared, so the last worker's ack wait wins either way.
      if (!(error instanceof JetStreamApiError)) throw error
      await jsm.consumers.update(streamName, consumerName, { ack_wait: ackWait, max_deliver: -1 })
    }
    return js.consumers.get(streamName, consumerName)
  })

  const setUp = <A>(what: () => Promise<A>): Effect.Effect<A, BusError> =>
    Effect.tryPromise({
      try: what,
      catch: (cause) => new BusError({ message: `cannot set up the NATS work queue ${streamName}/${consumerName}: ${firstLine(cause)}`, cause })
    })

  const submit: Bus['submitChild'] = (request) =>
    Effect.gen(function* () {
      yield* setUp(stream.get)
      const payload = encodeJson(request)
      if (payload === undefined) return yield* Effect.fail(new BusError({ message: `child run ${request.runId} cannot be encoded as JSON` }))
      yield* Effect.tryPromise({
        // The run id as message id: JetStream drops a resubmission within its duplicate window.
        try: () => js.publish(subject, payload, { msgID: request.runId }),
        catch: (cause) => new BusError({ message: `cannot submit child run ${request.runId}: ${firstLine(cause)}`, cause })
      })
    })

  // One pull request for one message; `undefined` when it expired empty. Interrupted (the
  // worker's scope closed), it withdraws the request, and hands back a message that raced in.
  const pullOne = (source: Consumer): Effect.Effect<JsMsg | undefined, unknown> =>
    Effect.async<JsMsg | undefined, unknown>((resume) => {
      let cancelled = false
      let messages: ConsumerMessages | undefined
      void (async () => {
        try {
          messages = await source.fetch({ max_messages: 1, expires: PULL_EXPIRES_MS })
          if (cancelled) {
            await messages.close()
            return
          }
          let received: JsMsg | undefined
          for await (const message of messages) {
            if (cancelled || received !== undefined) message.nak()
            else received = message
          }
          if (!cancelled) resume(Effect.succeed(received))
          else received?.nak()
        } catch (error) {
          if (!cancelled) resume(Effect.fail(error))
        }
      })()
      return Effect.sync(() => {
        cancelled = true
        void messages?.close().catch(() => undefined)
      })
    })

  const handleMessage = (message: JsMsg, handle: (delivery: ChildDelivery) => Effect.Effect<void, unknown>, options: ConsumeOptions): Effect.Effect<void> => {
    const decoded = decodeChildRequest(bytesToText(message.data))
    // Not ours to drive and never will be: drop it for good rather than redeliver it forever,
    // and say why in the log. No reason with the term: servers before 2.10 do not recognise
    // `+TERM <reason>` and would leave the message pending.
    if (Either.isLeft(decoded)) {
      const log = options.log ?? stderrLog
      return Effect.zipRight(
        Effect.sync(() => log(`refused a child-run request: ${decoded.left}`)),
        quietly(() => message.term())
      )
    }
    const request = decoded.right
    const delivery: ChildDelivery = {
      request,
      deliveryCount: message.info.deliveryCount,
      working: quietly(() => message.working()),
      ack: quietly(() => message.ack()),
      nak: quietly(() => message.nak()),
      term: quietly(() => message.term())
    }
    return serveDelivery(delivery, ackWaitMs, handle, options)
  }

  const pullRetry = Schedule.exponential(PULL_RETRY_MS).pipe(Schedule.union(Schedule.spaced(PULL_RETRY_MAX)))

  // A slot outlives any failed pull: it is logged, and the slot pulls again on `pullRetry`.
  const slot = (handle: (delivery: ChildDelivery) => Effect.Effect<void, unknown>, options: ConsumeOptions): Effect.Effect<never> =>
    Effect.forever(
      surviving(
        `pull a child-run request from ${streamName}/${consumerName}`,
        Effect.gen(function* () {
          const source = yield* Effect.tryPromise(consumer.get)
          return yield* pullOne(source)
        }).pipe(
          Effect.tapError(() =>
            Effect.sync(() => {
              // The consumer may have been deleted under us: set it up again on the next pull.
              consumer.reset()
              stream.reset()
            })
          )
        ),
        options.log ?? stderrLog,
        pullRetry
      ).pipe(Effect.flatMap((message) => (message === undefined ? Effect.void : handleMessage(message, handle, options))))
    )

  const consume: Bus['consumeChildren'] = (handle, options) =>
    Effect.gen(function* () {
      const { concurrency } = options
      if (!Number.isInteger(concurrency) || concurrency < 1) {
        return yield* Effect.fail(new BusError({ message: `concurrency must be a positive integer, got ${concurrency}` }))
      }
      yield* setUp(consumer.get)
      yield* Effect.forkScoped(
        Effect.all(
          Array.from({ length: concurrency }, () => slot(handle, options)),
          { concurrency: 'unbounded', discard: true }
        )
      )
    })

  // The stream made or found, as a worker's first pull would: a server without JetStream answers no one.
  const check: Bus['checkWorkQueue'] = Effect.tryPromise({
    try: () => stream.get(),
    catch: (cause) =>
      new BusError({
        message: `the NATS server has no usable JetStream work queue ${streamName} (is JetStream enabled, -js?): ${cause instanceof Error ? cause.message.split('\n')[0] : String(cause)}`,
        cause
      })
  }).pipe(Effect.asVoid)

  return { submit, consume, check }
}
