import type { Consumer, JetStreamManager } from '@nats-io/jetstream'
import { AckPolicy, DeliverPolicy, jetstream, JetStreamApiError, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream'
import type { NatsConnection } from '@nats-io/transport-node'
import { nanos } from '@nats-io/transport-node'

/** Where child-run requests wait: one work-queue stream and one durable consumer all workers share. */
export interface WorkQueueConfig {
  readonly streamName: string
  readonly consumerName: string
  readonly subject: string
  readonly ackWaitMs: number
}

/** The work queue's stream and durable consumer, each set up on first use and kept while it works. */
export interface WorkQueueSetup {
  /** The stream, made or found. */
  readonly stream: () => Promise<JetStreamManager>
  /** The durable consumer every worker shares, made or updated (after the stream). */
  readonly consumer: () => Promise<Consumer>
  /** Forgets both: the next use sets them up again (the consumer may have been deleted under us). */
  readonly reset: () => void
}

// JetStream's "stream name already in use with a different configuration".
const STREAM_NAME_IN_USE = 10058

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

/**
 * A work-queue stream on the start subject, created or updated on first use (several workers may
 * race to create it); one durable pull consumer with explicit acks and unlimited redelivery (a
 * request comes back as long as its worker dies; one whose handling keeps failing is terminated
 * by `serveDelivery` instead).
 */
export const workQueueSetup = (nc: NatsConnection, config: WorkQueueConfig): WorkQueueSetup => {
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

  return {
    stream: stream.get,
    consumer: consumer.get,
    reset: () => {
      consumer.reset()
      stream.reset()
    }
  }
}
