import { Effect, FiberSet, type Scope } from 'effect'
import type { BusChildQueue, ChildDelivery, ConsumeOptions } from '../protocol/bus.js'
import { BusError, serveDelivery } from '../protocol/bus.js'
import { deliveryOf, type QueuedRequest, queuedRequest, requeued } from './in-process-delivery.js'
import { viaJson } from './wire.js'

interface Consumer {
  readonly handle: (delivery: ChildDelivery) => Effect.Effect<void, unknown>
  readonly options: ConsumeOptions
  readonly concurrency: number
  readonly run: (effect: Effect.Effect<void>) => unknown
  active: number
}

/** The consumers of the queue, each taking the next request in turn while it has a free slot. */
interface ConsumerRing {
  /** Joins `consumer` to the ring until the scope closes. */
  readonly join: (consumer: Consumer) => Effect.Effect<void, never, Scope.Scope>
  /** The next consumer with a free slot; undefined when all are busy (or none consumes). */
  readonly pick: () => Consumer | undefined
}

const consumerRing = (): ConsumerRing => {
  const consumers: Consumer[] = []
  let next = 0
  return {
    join: (consumer) =>
      Effect.acquireRelease(
        Effect.sync(() => consumers.push(consumer)),
        () =>
          Effect.sync(() => {
            const index = consumers.indexOf(consumer)
            if (index !== -1) consumers.splice(index, 1)
          })
      ).pipe(Effect.asVoid),
    pick: () => {
      for (let i = 0; i < consumers.length; i++) {
        const index = (next + i) % consumers.length
        const consumer = consumers[index]
        if (consumer !== undefined && consumer.active < consumer.concurrency) {
          next = index + 1
          return consumer
        }
      }
      return undefined
    }
  }
}

/**
 * The embedded bus's child-run queue, with the delivery rules of the JetStream one
 * (nats-work-queue.ts): each request to one consumer with a free slot, consumers taken in turn;
 * redelivery after `ackWaitMs` without an ack or a `working` (in-process-delivery.ts); `nak`
 * hands it back at once; resubmitting a queued or running run id is a no-op.
 */
export const makeInProcessWorkQueue = (ackWaitMs: number): BusChildQueue => {
  const entries = new Map<string, QueuedRequest>()
  const queue: QueuedRequest[] = []
  const consumers = consumerRing()
  let dispatchScheduled = false

  const deliveries = {
    // Redeliveries go first, as JetStream serves its redelivery queue before new messages.
    requeue: (entry: QueuedRequest): void => {
      requeued(entry)
      queue.unshift(entry)
      scheduleDispatch()
    },
    forget: (entry: QueuedRequest): void => {
      if (entries.get(entry.request.runId) === entry) entries.delete(entry.request.runId)
    }
  }

  const deliver = (consumer: Consumer, entry: QueuedRequest): void => {
    const delivery = deliveryOf(entry, ackWaitMs, deliveries)
    consumer.active += 1
    consumer.run(
      serveDelivery(delivery, ackWaitMs, consumer.handle, consumer.options).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            consumer.active -= 1
            scheduleDispatch()
          })
        )
      )
    )
  }

  // Dispatch runs on its own turn of the event loop: a handler that naks at once must not
  // recurse into another delivery on the same stack, nor starve I/O.
  function scheduleDispatch(): void {
    if (dispatchScheduled) return
    dispatchScheduled = true
    setImmediate(() => {
      dispatchScheduled = false
      for (;;) {
        const entry = queue[0]
        if (entry === undefined) return
        const consumer = consumers.pick()
        if (consumer === undefined) return
        queue.shift()
        deliver(consumer, entry)
      }
    })
  }

  const submitChild: BusChildQueue['submitChild'] = (request) =>
    Effect.suspend(() => {
      if (entries.has(request.runId)) return Effect.void
      const copy = viaJson(request)
      if (copy === undefined) return Effect.fail(new BusError({ message: `child run ${request.runId} cannot be encoded as JSON` }))
      const entry = queuedRequest(copy)
      entries.set(request.runId, entry)
      queue.push(entry)
      scheduleDispatch()
      return Effect.void
    })

  const consumeChildren: BusChildQueue['consumeChildren'] = (handle, options) =>
    Effect.gen(function* () {
      const { concurrency } = options
      if (!Number.isInteger(concurrency) || concurrency < 1) {
        return yield* Effect.fail(new BusError({ message: `concurrency must be a positive integer, got ${concurrency}` }))
      }
      // The fiber set is released last, so the consumer stops taking work before its handlers
      // are interrupted.
      const run = yield* FiberSet.makeRuntime<never, void, never>()
      const consumer: Consumer = { handle, options, concurrency, run, active: 0 }
      yield* consumers.join(consumer)
      scheduleDispatch()
    })

  // In one process nothing can be missing: there is always a queue.
  return { submitChild, consumeChildren, checkWorkQueue: Effect.void }
}
