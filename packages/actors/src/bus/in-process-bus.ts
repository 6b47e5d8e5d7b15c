import type { Bus } from '../protocol/bus.js'
import { makeInProcessBroadcasts } from './in-process-broadcasts.js'
import { makeInProcessRequests } from './in-process-requests.js'
import { makeInProcessWorkQueue } from './in-process-work-queue.js'

/** Options of {@link makeInProcessBus}. */
export interface InProcessBusOptions {
  /** How long a delivery may go unacked (without `working`) before it is delivered again. */
  readonly ackWaitMs?: number
}

const DEFAULT_ACK_WAIT_MS = 30_000

/**
 * The embedded bus: child runs, events, results and control in one process, with the same
 * delivery rules as NATS (each request to one consumer, redelivery after `ackWaitMs` without an
 * ack, `nak` hands it back at once, resubmitting a queued or running run id is a no-op).
 */
export const makeInProcessBus = (options: InProcessBusOptions = {}): Bus => ({
  kind: 'in-process',
  ...makeInProcessWorkQueue(options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS),
  ...makeInProcessBroadcasts(),
  ...makeInProcessRequests()
})
