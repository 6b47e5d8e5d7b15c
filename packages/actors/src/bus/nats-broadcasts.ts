import type { Msg, NatsConnection } from '@nats-io/transport-node'
import { Effect } from 'effect'
import type { BusBroadcasts } from '../protocol/bus.js'
import type { RunStreamEvent } from '../protocol/run-stream-event.js'
import { PROTOCOL_VERSION, type RunDoneMessage, type RunEventMessage, type RunRequestMessage, type RunStartedMessage } from '../protocol/messages.js'
import { isSubjectToken, type NatsSubjects } from './nats-subjects.js'
import { subscribed, validToken } from './nats-subscription.js'
import { bytesToText, decodeRunDone, decodeRunEvent, decodeStreamEvent, decodeVersioned, encodeJson } from './wire.js'

const publish = (nc: NatsConnection, subject: string, message: unknown): Effect.Effect<void> =>
  Effect.sync(() => {
    const payload = encodeJson(message)
    if (payload === undefined) return
    try {
      nc.publish(subject, payload)
    } catch {
      // Best effort: a run never fails because the bus is down.
    }
  })

/** A subscription's callback: each message decoded (one that does not decode is dropped) and delivered. */
const listen =
  <A>(decode: (text: string) => A | undefined, deliver: (message: A) => void) =>
  (error: Error | null, msg: Msg): void => {
    if (error !== null) return
    const message = decode(bytesToText(msg.data))
    if (message === undefined) return
    try {
      deliver(message)
    } catch {
      // A listener that throws must not end the subscription.
    }
  }

/**
 * The NATS bus's broadcasts: plain subjects (docs/nats.md), published best effort, each watch a
 * subscription held for its scope. A run id that cannot be a subject token is published nowhere.
 */
export const makeNatsBroadcasts = (nc: NatsConnection, subjects: NatsSubjects): BusBroadcasts => {
  /** A watch of one run's subject: only that run's messages are delivered, whatever arrives on it. */
  const watchRun = <A extends { readonly runId: string }>(
    runId: string,
    subject: string,
    decode: (text: string) => A | undefined,
    deliver: (message: A) => void
  ) =>
    validToken('run id', runId).pipe(
      Effect.zipRight(
        subscribed(nc, () =>
          nc.subscribe(subject, {
            callback: listen<A>(decode, (message) => {
              if (message.runId === runId) deliver(message)
            })
          })
        )
      )
    )

  return {
    publishEvent: (message) => (isSubjectToken(message.runId) ? publish(nc, subjects.events(message.runId), message) : Effect.void),
    // A stream event is the event itself with the protocol version (docs/streaming.md).
    publishStream: (runId, event) => (isSubjectToken(runId) ? publish(nc, subjects.stream(runId), { v: PROTOCOL_VERSION, ...event }) : Effect.void),
    watchStream: (runId, onEvent) => watchRun<RunStreamEvent>(runId, subjects.stream(runId), decodeStreamEvent, onEvent),
    publishStarted: (message) => (isSubjectToken(message.runId) ? publish(nc, subjects.started(message.runId), message) : Effect.void),
    watchStarted: (onStarted) =>
      subscribed(nc, () =>
        nc.subscribe(subjects.anyStarted, { callback: listen<RunStartedMessage>(decodeVersioned<RunStartedMessage>(['runId', 'goal']), onStarted) })
      ),
    publishRequest: (message) => publish(nc, subjects.requests, message),
    watchRequests: (onRequest) =>
      subscribed(nc, () =>
        nc.subscribe(subjects.requests, { callback: listen<RunRequestMessage>(decodeVersioned<RunRequestMessage>(['runId', 'rootId']), onRequest) })
      ),
    publishDone: (message) => (isSubjectToken(message.runId) ? publish(nc, subjects.done(message.runId), message) : Effect.void),
    watchDone: (onDone) => subscribed(nc, () => nc.subscribe(subjects.anyDone, { callback: listen<RunDoneMessage>(decodeRunDone, onDone) })),
    watchEvents: (runId, onEvent) => watchRun<RunEventMessage>(runId, subjects.events(runId), decodeRunEvent, onEvent)
  }
}
