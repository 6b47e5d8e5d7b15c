import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import type { StatelyInspectionEvent } from '@statelyai/inspect'
import type { InspectionEvent } from 'xstate'
import type { InspectedRun } from '../driver/run-observer.js'

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

/** The part of the `ws` client this module uses. */
interface RelaySocket {
  readonly readyState: number
  send(data: string): void
  close(code?: number): void
  terminate(): void
  on(event: 'open', listener: () => void): unknown
  on(event: 'close', listener: () => void): unknown
  on(event: 'error', listener: (error: Error) => void): unknown
}
type RelaySocketClass = new (url: string) => RelaySocket

/** Run actors whose ids an inspector remembers (the most recently active). */
const MAX_RUNS = 10_000

const CONNECTING = 0
const OPEN = 1
/** How long `stop()` waits for a socket to open or to close politely before cutting it off. */
const CLOSE_GRACE_MS = 1000

/** Resolves when a connecting socket opens or fails, or after the grace period. */
const settled = (socket: RelaySocket): Promise<void> =>
  new Promise((resolve) => {
    const giveUp = setTimeout(resolve, CLOSE_GRACE_MS)
    const done = (): void => {
      clearTimeout(giveUp)
      resolve()
    }
    socket.on('open', done)
    socket.on('close', done)
  })

/**
 * Node 20 has no global WebSocket client. `@statelyai/inspect` depends on `ws` for its own
 * adapters, so the client is taken from there rather than from a dependency of our own.
 */
const loadSocketClass = (): RelaySocketClass => {
  const inspectEntry = createRequire(import.meta.url).resolve('@statelyai/inspect')
  return createRequire(inspectEntry)('ws') as RelaySocketClass
}

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
  const Socket = loadSocketClass()
  const reconnectMs = options.reconnectMs ?? 2000
  const maxBuffered = options.maxBufferedEvents ?? 200
  const prefix = `${randomUUID().slice(0, 8)}:`

  let socket: RelaySocket | undefined
  let timer: NodeJS.Timeout | undefined
  let stopped = false
  let warned = false
  const buffer: string[] = []
  // XState session id of each run actor -> the run (sessions are per process; runs are not).
  const runs = new Map<string, InspectedRun>()

  const warnOnce = (reason: string): void => {
    if (warned || stopped) return
    warned = true
    try {
      options.onUnreachable?.(reason)
    } catch {
      // Reporting must not break the run being inspected.
    }
  }

  const connect = (): void => {
    if (stopped) return
    let current: RelaySocket
    try {
      current = new Socket(options.url)
    } catch (error) {
      warnOnce(error instanceof Error ? error.message : String(error))
      return
    }
    socket = current
    current.on('open', () => {
      if (socket !== current) return
      for (const text of buffer.splice(0)) current.send(text)
    })
    current.on('error', (error) => warnOnce(error.message))
    current.on('close', () => {
      if (socket !== current) return
      socket = undefined
      if (stopped) return
      timer = setTimeout(connect, reconnectMs)
      timer.unref()
    })
  }

  const send = (event: StatelyInspectionEvent): void => {
    if (stopped) return
    const text = toJson(scopeIds(event, prefix, runs))
    if (text === undefined) return
    if (socket?.readyState === OPEN) {
      socket.send(text)
      return
    }
    buffer.push(text)
    if (buffer.length > maxBuffered) buffer.shift()
  }

  const inspector = createInspector({ start: connect, send })
  inspector.start()

  let stopping: Promise<void> | undefined
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      // @statelyai/inspect hands each event on after a setTimeout(0): let those already queued through.
      await new Promise((resolve) => setTimeout(resolve, 0))
      stopped = true
      clearTimeout(timer)
      const last = socket
      // A run shorter than the handshake: give the socket a moment to open and take the buffer.
      if (last?.readyState === CONNECTING) await settled(last)
      buffer.length = 0
      socket = undefined
      if (last === undefined) return
      if (last.readyState !== OPEN) {
        last.terminate()
        return
      }
      // A polite close flushes what was sent; a relay that never answers it is cut off.
      await new Promise<void>((resolve) => {
        const cutOff = setTimeout(() => {
          last.terminate()
          resolve()
        }, CLOSE_GRACE_MS)
        last.on('close', () => {
          clearTimeout(cutOff)
          resolve()
        })
        last.close(1000)
      })
    })())

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
    stop
  }
}
