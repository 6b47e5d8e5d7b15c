import { Effect } from 'effect'
import type { ChildDelivery } from '../protocol/bus.js'
import type { ChildRunRequest } from '../protocol/messages.js'

/** A child-run request in the embedded queue, from its submission until it is acked or terminated. */
export interface QueuedRequest {
  readonly request: ChildRunRequest
  state: 'queued' | 'in-flight' | 'settled'
  deliveries: number
  /** Bumped on each delivery so a late ack, nak or working from an older one is ignored. */
  generation: number
  timer: ReturnType<typeof setTimeout> | undefined
}

/** What a delivery does to its queue: hand the request back (redeliveries first), or forget it for good. */
export interface DeliveryQueue {
  readonly requeue: (entry: QueuedRequest) => void
  readonly forget: (entry: QueuedRequest) => void
}

export const queuedRequest = (request: ChildRunRequest): QueuedRequest => ({ request, state: 'queued', deliveries: 0, generation: 0, timer: undefined })

const isCurrent = (entry: QueuedRequest, generation: number): boolean => entry.state === 'in-flight' && entry.generation === generation

const clearTimer = (entry: QueuedRequest): void => {
  if (entry.timer !== undefined) clearTimeout(entry.timer)
  entry.timer = undefined
}

/** Hands `entry` back to `queue`: the ack deadline passed, or its consumer let go of it. */
export const requeued = (entry: QueuedRequest): void => {
  clearTimer(entry)
  entry.state = 'queued'
}

/**
 * Delivers `entry` once more: in flight from now, its ack deadline armed, and the delivery whose
 * `working`, `ack`, `nak` and `term` act on this delivery only (as JetStream's acks of one
 * delivery of a message do): a late answer to an older delivery changes nothing.
 */
export const deliveryOf = (entry: QueuedRequest, ackWaitMs: number, queue: DeliveryQueue): ChildDelivery => {
  entry.state = 'in-flight'
  entry.deliveries += 1
  entry.generation += 1
  const generation = entry.generation
  const armTimer = (): void => {
    clearTimer(entry)
    entry.timer = setTimeout(() => {
      if (isCurrent(entry, generation)) queue.requeue(entry)
    }, ackWaitMs)
    // An unacked delivery must not keep the process alive on its own.
    entry.timer.unref()
  }
  // An ack and JetStream's `term` alike: the request is gone for good.
  const settle = Effect.sync(() => {
    if (!isCurrent(entry, generation)) return
    clearTimer(entry)
    entry.state = 'settled'
    queue.forget(entry)
  })
  armTimer()
  return {
    request: entry.request,
    deliveryCount: entry.deliveries,
    working: Effect.sync(() => {
      if (isCurrent(entry, generation)) armTimer()
    }),
    ack: settle,
    nak: Effect.sync(() => {
      if (isCurrent(entry, generation)) queue.requeue(entry)
    }),
    term: settle
  }
}
