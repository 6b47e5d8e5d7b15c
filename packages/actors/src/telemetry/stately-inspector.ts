import { randomUUID } from 'node:crypto'
import type { StatelyInspectionEvent } from '@statelyai/inspect'
import type { InspectionEvent } from 'xstate'
import type { InspectedRun } from '../driver/run-observer.js'
import { relayLink } from './relay-link.js'

/** Where `@statelyai/inspect/server`'s `createInspectorServer()` listens by default. */
export const DEFAULT_INSPECTOR_RELAY = 'ws://127.0.0.1:8080'

export interface StatelyInspectorOptions {
  /** The relay's WebSocket URL (`ws://` or `wss://`), e.g. `@statelyai/inspect/server`'s. */
  readonly url: string
  /** Told once, the first time the relay cannot be reached (or drops); runs go on without it. */
  readonly onUnreachable?: (reason: string) => void
  /** Wait between connection attempts (default 2000 ms); the timer never keeps the process alive. */
  readonly reconnectMs?: number
  /** Events kept while not connected, oldest dropped first (default 200, as Stately's adapters). */
  readonly maxBufferedEvents?: number
}

/** A live link to an inspector relay. */
export interface StatelyInspector {
  /** The XState inspection callback: pass it as `Agentvisor.open({ inspect })`. */
  readonly inspect: (event: InspectionEvent, run?: InspectedRun) => void
  /** Sends what is pending, closes the socket and clears every timer. Calling it again is a no-op. */
  readonly stop: () => Promise<void>
}

/** Run actors whose ids an inspector remembers (the most recently active). */
const MAX_RUNS = 10_000

/**
 * The ids of an event as the relay sees them. A run's actor is the run: its session is the run id
 * (the same in every process that drives it: a resume, a worker), its parent its parent run's
 * and its root the tree's, so the Stately inspector shows a tree across processes. Anything else
 * keeps XState's per-process numbering (`x:0`, `x:1`...), prefixed per inspector so that
 * processes sharing a relay never mix.
 */
const scopeIds = (event: StatelyInspectionEvent, prefix: string, runs: ReadonlyMap<string, InspectedRun>): StatelyInspectionEvent => {
  const run = runs.get(event.sessionId)
  if (run !== undefined) {
    const root = run.rootId
    switch (event.type) {
      case '@xstate.actor':
        return { ...event, sessionId: run.runId, rootId: root, parentId: run.parentId }
      case '@xstate.event':
        return {
          ...event,
          sessionId: run.runId,
          rootId: root,
          sourceId: event.sourceId === undefined ? undefined : (runs.get(event.sourceId)?.runId ?? `${prefix}${event.sourceId}`)
        }
      case '@xstate.snapshot':
        return { ...event, sessionId: run.runId, rootId: root }
    }
  }
  const scope = (id: string | undefined): string | undefined => (id === undefined ? undefined : `${prefix}${id}`)
  const sessionId = `${prefix}${event.sessionId}`
  switch (event.type) {
    case '@xstate.actor':
      return { ...event, sessionId, rootId: scope(event.rootId), parentId: scope(event.parentId) }
    case '@xstate.event':
      return { ...event, sessionId, rootId: `${prefix}${event.rootId}`, sourceId: scope(event.sourceId) }
    case '@xstate.snapshot':
      return { ...event, sessionId, rootId: `${prefix}${event.rootId}` }
  }
}

/** JSON of an event, or undefined for one that cannot be serialised (it is dropped, not thrown). */
const toJson = (event: StatelyInspectionEvent): string | undefined => {
  try {
    return JSON.stringify(event)
  } catch {
    return undefined
  }
}

/**
 * Streams XState inspection events of the run actors to a Stately inspector relay over a
 * WebSocket (`@statelyai/inspect`'s `createInspector` with an adapter of our own). Unlike
 * `createWebSocketInspector`, whose retry timer outlives `stop()` and keeps a process alive when
 * the relay is down, an unreachable relay here costs one warning: events wait in a bounded buffer,
 * reconnection timers are unref'd, and `stop()` leaves no socket or timer behind. Actor ids are
 * prefixed per inspector (`1f2e3d4c:x:0`) so that processes sharing a relay never mix. It never
 * uses the Sky inspector, which needs the network and keeps the process alive.
 *
 * @example
 * const inspector = await openStatelyInspector({ url: 'ws://127.0.0.1:8080' })
 * const av = await Agentvisor.open({ db: 'av.db', inspect: inspector.inspect })
 * // ... runs ...
 * await av.close()
 * await inspector.stop()
 */
export const openStatelyInspector = async (options: StatelyInspectorOptions): Promise<StatelyInspector> => {
  const { createInspector } = await import('@statelyai/inspect')
  const prefix = `${randomUUID().slice(0, 8)}:`
  const link = relayLink({
    url: options.url,
    reconnectMs: options.reconnectMs ?? 2000,
    maxBuffered: options.maxBufferedEvents ?? 200,
    onUnreachable: options.onUnreachable
  })
  // XState session id of each run actor -> the run (sessions are per process; runs are not).
  const runs = new Map<string, InspectedRun>()

  const inspector = createInspector({
    start: link.connect,
    send: (event: StatelyInspectionEvent) => {
      if (!link.open) return
      const text = toJson(scopeIds(event, prefix, runs))
      if (text !== undefined) link.send(text)
    }
  })
  inspector.start()

  return {
    inspect: (event, run) => {
      try {
        if (run !== undefined) {
          runs.delete(event.actorRef.sessionId)
          runs.set(event.actorRef.sessionId, run)
          // A long-lived worker inspects many runs: the oldest are forgotten (their actors are done).
          if (runs.size > MAX_RUNS) runs.delete(runs.keys().next().value!)
        }
        inspector.inspect.next?.(event)
      } catch {
        // Inspection is a window on the run, never a reason for it to fail.
      }
    },
    stop: link.stop
  }
}
