import { Effect, type Scope } from 'effect'
import type { BusBroadcasts } from '../protocol/bus.js'
import type { RunDoneMessage, RunEventMessage, RunRequestMessage, RunStartedMessage } from '../protocol/messages.js'
import { viaJson } from './wire.js'

const notify = <A>(listener: (message: A) => void, message: A): void => {
  try {
    listener(message)
  } catch {
    // A listener that throws must not stop the publisher or the other listeners.
  }
}

/** Who listens to one kind of message: publishing to them all, joining them for a scope. */
interface Listeners<A> {
  readonly publish: (message: A) => Effect.Effect<void>
  readonly watch: (listener: (message: A) => void) => Effect.Effect<void, never, Scope.Scope>
}

const listenersOf = <A>(): Listeners<A> => {
  const listeners = new Set<(message: A) => void>()
  return {
    publish: (message) =>
      Effect.sync(() => {
        if (listeners.size === 0) return
        const copy = viaJson(message)
        if (copy !== undefined) for (const listener of listeners) notify(listener, copy)
      }),
    watch: (listener) =>
      Effect.acquireRelease(
        Effect.sync(() => listeners.add(listener)),
        () => Effect.sync(() => listeners.delete(listener))
      ).pipe(Effect.asVoid)
  }
}

/**
 * The embedded bus's broadcasts: each listener of the process hears every message of its kind
 * (a run's events, those of its run only), as a JSON copy. Stream events are not broadcast: in
 * one process `events()` reads them where they are made, and nothing travels.
 */
export const makeInProcessBroadcasts = (): BusBroadcasts => {
  const eventListeners = new Set<{ readonly runId: string; readonly onEvent: (message: RunEventMessage) => void }>()
  const done = listenersOf<RunDoneMessage>()
  const started = listenersOf<RunStartedMessage>()
  const requests = listenersOf<RunRequestMessage>()

  // Delivered when called, synchronously: a run's every transition is published, and with
  // nobody listening (the usual case) that must cost nothing (docs/architecture.md, "The hot path").
  const publishEvent: BusBroadcasts['publishEvent'] = (message) => {
    if (eventListeners.size === 0) return Effect.void
    const copy = viaJson(message)
    if (copy === undefined) return Effect.void
    for (const listener of eventListeners) if (listener.runId === message.runId) notify(listener.onEvent, copy)
    return Effect.void
  }

  const watchEvents: BusBroadcasts['watchEvents'] = (runId, onEvent) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        const listener = { runId, onEvent }
        eventListeners.add(listener)
        return listener
      }),
      (listener) => Effect.sync(() => eventListeners.delete(listener))
    ).pipe(Effect.asVoid)

  return {
    publishEvent,
    watchEvents,
    publishDone: done.publish,
    watchDone: done.watch,
    publishStream: () => Effect.void,
    watchStream: () => Effect.void,
    publishStarted: started.publish,
    watchStarted: started.watch,
    publishRequest: requests.publish,
    watchRequests: requests.watch
  }
}
