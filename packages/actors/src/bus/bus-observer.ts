import { Effect } from 'effect'
import { type Executor, listApprovals } from '@agentvisor/store'
import { pendingRequestOf } from '../approval/pending-request.js'
import { type EventCursor, eventCursor, textKey } from '../events/event-cursor.js'
import { readEvents } from '../events/run-events.js'
import type { RunObserver, TextDelta } from '../driver/run-observer.js'
import type { Bus } from '../protocol/bus.js'
import { PROTOCOL_VERSION } from '../protocol/messages.js'
import { runPromise } from '../loop/run-promise.js'

/**
 * Publishes a run's transitions on `agentvisor.runs.<id>.events` and its end on `.done` (with
 * the run's last answer as `result`, read by `lastText`: the run writer's `lastStepText`).
 * Publishing is best effort and never slows the run down.
 */
export const busObserver = (bus: Bus, lastText: (runId: string) => Effect.Effect<string | undefined, unknown>, db?: Executor): RunObserver => {
  const streams = bus.kind === 'nats' && db !== undefined ? streamPublisher(bus, db) : undefined
  // Each run's root, from its drive's start: what `agentvisor.requests` names with each request.
  const roots = new Map<string, string>()
  return {
    onDriveStarted: (info) => {
      const rootId = info.rootId ?? info.runId
      roots.set(info.runId, rootId)
      Effect.runFork(
        bus.publishStarted({
          v: PROTOCOL_VERSION,
          runId: info.runId,
          parentId: info.parentId ?? null,
          rootId,
          goal: info.goal ?? '',
          agent: info.agent ?? null,
          resumed: info.resumed
        })
      )
    },
    onTransition: (t) => {
      // A run paused on requests: each announced with its root, for whoever decides (docs/nats.md).
      if (db !== undefined && (t.to === 'awaitingApproval' || t.to === 'awaitingInput')) announceRequests(bus, db, t.runId, roots.get(t.runId) ?? t.runId)
      const publish = bus.publishEvent({ v: PROTOCOL_VERSION, runId: t.runId, seq: t.seq, from: t.from, event: t.event, to: t.to, at: t.at })
      // The in-process bus has delivered already (as it was called): nothing to run for it.
      if (bus.kind !== 'in-process') Effect.runFork(publish)
      streams?.moved(t.runId, t.seq)
    },
    ...(streams !== undefined
      ? {
          onText: (delta: TextDelta) => {
            streams.heard(delta)
            Effect.runFork(
              bus.publishStream(delta.runId, { kind: 'text', runId: delta.runId, at: delta.at, step: delta.step, attempt: delta.attempt, delta: delta.delta })
            )
          },
          onDriveEnded: ({ runId }: { runId: string }) => streams.ended(runId)
        }
      : {}),
    onFinished: (result) => {
      Effect.runFork(
        lastText(result.runId).pipe(
          Effect.orElseSucceed(() => undefined),
          Effect.flatMap((text) =>
            bus.publishDone({
              v: PROTOCOL_VERSION,
              runId: result.runId,
              status: result.status,
              steps: result.steps,
              ...(text !== undefined ? { result: text } : {}),
              ...(result.output !== undefined ? { output: result.output } : {}),
              ...(result.usage !== undefined ? { usage: result.usage } : {}),
              ...(result.treeUsage !== undefined ? { treeUsage: result.treeUsage } : {}),
              ...(result.error !== undefined ? { error: result.error } : {})
            })
          )
        )
      )
    }
  }
}

/** Publishes the run's open requests on `agentvisor.requests`; best effort, as every publication. */
const announceRequests = (bus: Bus, db: Executor, runId: string, rootId: string): void => {
  runPromise(listApprovals(db, runId)).then(
    (rows) => {
      for (const row of rows) {
        if (row.status === 'pending') Effect.runFork(bus.publishRequest({ v: PROTOCOL_VERSION, runId, rootId, request: pendingRequestOf(row) }))
      }
    },
    () => undefined
  )
}

/**
 * Publishes each run's durable events on its `.stream` subject (docs/streaming.md): after each
 * transition, what the store recorded since the last reading, read as `events()` reads it, so that
 * a subscriber sees the same events with the same seqs. One reading at a time per run; the events
 * of one drive start at its first transition.
 */
const streamPublisher = (bus: Bus, db: Executor) => {
  const runs = new Map<string, { cursor: Promise<EventCursor> | undefined; heard: Set<string>; reading: boolean; again: boolean; ended: boolean }>()
  const pump = async (runId: string): Promise<void> => {
    const run = runs.get(runId)
    if (run === undefined || run.cursor === undefined) return
    if (run.reading) {
      run.again = true
      return
    }
    run.reading = true
    try {
      const cursor = await run.cursor
      do {
        run.again = false
        for (const event of await runPromise(readEvents(db, cursor))) Effect.runFork(bus.publishStream(runId, event))
      } while (run.again)
    } catch {
      // Best effort, as every publication: a reading that fails is tried again at the next transition.
    } finally {
      run.reading = false
      if (run.ended) runs.delete(runId)
    }
  }
  return {
    moved: (runId: string, seq: number): void => {
      let run = runs.get(runId)
      if (run === undefined) {
        const heard = new Set<string>()
        run = { cursor: runPromise(eventCursor(db, runId, seq, heard)), heard, reading: false, again: false, ended: false }
        run.cursor?.catch(() => undefined)
        runs.set(runId, run)
      }
      void pump(runId)
    },
    /** Text published as it streamed: the reading does not publish that answer's text again. */
    heard: (delta: TextDelta): void => {
      runs.get(delta.runId)?.heard.add(textKey(delta.step, delta.attempt))
    },
    ended: (runId: string): void => {
      const run = runs.get(runId)
      if (run === undefined) return
      run.ended = true
      if (!run.reading) void pump(runId).then(() => runs.delete(runId))
    }
  }
}
