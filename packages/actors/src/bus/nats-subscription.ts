import type { NatsConnection, Subscription } from '@nats-io/transport-node'
import { Effect, type Scope } from 'effect'
import { BusError } from '../protocol/bus.js'
import { isSubjectToken } from './nats-subjects.js'
import { firstLine } from './nats-work-queue.js'

/** A run id or verb that cannot be a subject token fails before anything is sent or subscribed. */
export const validToken = (what: string, token: string): Effect.Effect<void, BusError> =>
  isSubjectToken(token) ? Effect.void : Effect.fail(new BusError({ message: `${what} ${JSON.stringify(token)} cannot be a NATS subject token` }))

/**
 * A subscription held for the scope. Its interest reaches the server before this returns, or a
 * message published right after (by another connection) could miss it.
 */
export const subscribed = (nc: NatsConnection, subscribe: () => Subscription): Effect.Effect<void, BusError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({ try: subscribe, catch: (cause) => new BusError({ message: `cannot subscribe: ${firstLine(cause)}`, cause }) }),
    (subscription) =>
      Effect.sync(() => {
        try {
          subscription.unsubscribe()
        } catch {
          // The connection is already closed, and the subscription with it.
        }
      })
  ).pipe(
    Effect.zipLeft(Effect.tryPromise({ try: () => nc.flush(), catch: (cause) => new BusError({ message: `cannot subscribe: ${firstLine(cause)}`, cause }) }))
  )
