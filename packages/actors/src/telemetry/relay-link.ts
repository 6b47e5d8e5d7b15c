import { createRequire } from 'node:module'

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

/** Closes an open socket politely, which flushes what was sent; one not open, or a relay that never answers the close, is cut off. */
const closePolitely = (socket: RelaySocket): Promise<void> => {
  if (socket.readyState !== OPEN) {
    socket.terminate()
    return Promise.resolve()
  }
  return new Promise<void>((resolve) => {
    const cutOff = setTimeout(() => {
      socket.terminate()
      resolve()
    }, CLOSE_GRACE_MS)
    socket.on('close', () => {
      clearTimeout(cutOff)
      resolve()
    })
    socket.close(1000)
  })
}

/** How a link reaches its relay. */
export interface RelayLinkOptions {
  /** The relay's WebSocket URL (`ws://` or `wss://`). */
  readonly url: string
  /** Wait between connection attempts; the timer never keeps the process alive. */
  readonly reconnectMs: number
  /** Texts kept while not connected, oldest dropped first. */
  readonly maxBuffered: number
  /** Told once, the first time the relay cannot be reached (or drops). */
  readonly onUnreachable?: ((reason: string) => void) | undefined
}

/**
 * A WebSocket to an inspector relay that outlives the relay going away: texts sent while it is
 * not open wait in a bounded buffer and go when it opens; a closed socket is reconnected after
 * `reconnectMs` on an unref'd timer; an unreachable relay costs one warning.
 */
export interface RelayLink {
  /** Opens the socket (`@statelyai/inspect` calls it as its adapter's `start`). */
  readonly connect: () => void
  /** Sends `text` now, or buffers it until the socket opens. */
  readonly send: (text: string) => void
  /** False once `stop` was called: nothing is sent any more. */
  readonly open: boolean
  /** Sends what is pending, closes the socket and clears every timer; leaves no socket or timer behind. Calling it again is a no-op. */
  readonly stop: () => Promise<void>
}

export const relayLink = (options: RelayLinkOptions): RelayLink => {
  const Socket = loadSocketClass()
  let socket: RelaySocket | undefined
  let timer: NodeJS.Timeout | undefined
  let stopped = false
  let warned = false
  const buffer: string[] = []

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
      timer = setTimeout(connect, options.reconnectMs)
      timer.unref()
    })
  }

  const send = (text: string): void => {
    if (socket?.readyState === OPEN) {
      socket.send(text)
      return
    }
    buffer.push(text)
    if (buffer.length > options.maxBuffered) buffer.shift()
  }

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
      if (last !== undefined) await closePolitely(last)
    })())

  return {
    connect,
    send,
    get open() {
      return !stopped
    },
    stop
  }
}
