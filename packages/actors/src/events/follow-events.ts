import type { Executor } from '@agentvisor/store'
import type { TextDelta } from '../driver/run-observer.js'
import type { EventHub } from './event-hub.js'
import type { RunStreamEvent } from '../protocol/run-stream-event.js'
import { type EventCursor, eventCursor, textKey } from './event-cursor.js'
import { readEvents } from './run-events.js'
import { runPromise } from '../loop/run-promise.js'

export interface FollowOptions {
  /** The first transition whose events are wanted (default 1: all of them). */
  readonly fromSeq?: number | undefined
  /** Where this process's runs announce news; without it (another process drives the run) the store is polled. */
  readonly hub?: EventHub | undefined
  /** How often the store is read when nothing announces news (default 100 ms; a safety net with a hub). */
  readonly pollMs?: number | undefined
  /**
   * Whether to stop although the run has not finished: asked after each read, once the events
   * read so far are handed out (a run whose driver here let go of it paused).
   */
  readonly stopWhen?: (() => boolean) | undefined
  /** Stops the reading from outside (`for await` left early does too). */
  readonly signal?: AbortSignal | undefined
}

/**
 * A run's events (docs/streaming.md): those recorded from `fromSeq` on, read from the store, then
 * each new one as it is recorded, until the run finishes (its `done` event is the last). The seam
 * between the two is the store itself: every reading starts where the last one ended (the next
 * transition's seq), so nothing is missed or repeated. `text` events come from the hub, in the
 * order they streamed, each placed after the transition durable when it came.
 */
export function followEvents(db: Executor, runId: string, options: FollowOptions = {}): AsyncGenerator<RunStreamEvent> {
  // Subscribed now, not at the first `next()`: the text of a call streaming right now is kept from here.
  const texts: TextDelta[] = []
  const feed: Feed = { texts, heard: new Set(), signalled: false, notify: undefined }
  const unsubscribe = options.hub?.subscribe(runId, {
    wake: () => wakeUp(feed),
    text: (delta) => {
      texts.push(delta)
      // Before the answer's transition is durable: a reading that sees it knows the text was heard.
      feed.heard.add(textKey(delta.step, delta.attempt))
      wakeUp(feed)
    }
  })
  return follow(db, runId, options, feed, unsubscribe)
}

interface Feed {
  readonly texts: TextDelta[]
  /** The calls whose text was heard live (run-events.ts `heardText`). */
  readonly heard: Set<string>
  signalled: boolean
  notify: (() => void) | undefined
}

const wakeUp = (feed: Feed): void => {
  feed.signalled = true
  feed.notify?.()
}

async function* follow(db: Executor, runId: string, options: FollowOptions, feed: Feed, unsubscribe: (() => void) | undefined): AsyncGenerator<RunStreamEvent> {
  const { texts } = feed
  const wake = (): void => wakeUp(feed)
  const cursor = await runPromise(eventCursor(db, runId, options.fromSeq ?? 1, feed.heard))
  options.signal?.addEventListener('abort', wake)
  const pollMs = options.pollMs ?? 100
  try {
    for (;;) {
      feed.signalled = false
      const events = await runPromise(readEvents(db, cursor))
      yield* ordered(runId, events, readable(texts, cursor))
      if (cursor.ended || options.signal?.aborted === true) return
      if (options.stopWhen?.() === true) {
        // One more reading: what was committed as the driver let go.
        yield* ordered(runId, await runPromise(readEvents(db, cursor)), texts.splice(0))
        return
      }
      if (!feed.signalled) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollMs)
          feed.notify = () => {
            clearTimeout(timer)
            resolve()
          }
        })
        feed.notify = undefined
      }
    }
  } finally {
    unsubscribe?.()
    options.signal?.removeEventListener('abort', wake)
  }
}

/**
 * The text heard so far whose call's dispatch has been read: taken after a reading, since a call's
 * pieces all come before its answer's transition is durable, so a reading that has the answer has
 * every piece before it in hand. Pieces of a call whose dispatch the reading did not reach yet wait
 * for the next one (they come in order: those of later calls follow).
 */
const readable = (texts: TextDelta[], cursor: EventCursor): TextDelta[] => {
  let n = 0
  while (n < texts.length && texts[n]!.afterSeq < cursor.nextSeq) n++
  return texts.splice(0, n)
}

/** Durable events in seq order with each text delta placed after the transition `afterSeq`. */
function* ordered(runId: string, events: ReadonlyArray<RunStreamEvent>, texts: ReadonlyArray<TextDelta>): Generator<RunStreamEvent> {
  let next = 0
  for (const event of events) {
    const seq = 'seq' in event ? event.seq : 0
    while (next < texts.length && texts[next]!.afterSeq < seq && event.kind === 'transition') yield textEvent(runId, texts[next++]!)
    yield event
  }
  while (next < texts.length) yield textEvent(runId, texts[next++]!)
}

const textEvent = (runId: string, delta: TextDelta): RunStreamEvent => ({
  kind: 'text',
  runId,
  at: delta.at,
  step: delta.step,
  attempt: delta.attempt,
  delta: delta.delta
})
