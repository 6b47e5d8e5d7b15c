import { type Executor, getRunRow, listApprovals, listAttempts, listRuns, listSteps, listTransitions, type StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import type { EventCursor } from './event-cursor.js'
import type { RunStreamEvent } from '../protocol/run-stream-event.js'
import { answerEvents, answerText, EVENT_READERS, type EventRows, endEvents, isAnswer, type TransitionRead } from './transition-events.js'

/**
 * The durable events of the transitions recorded since the cursor, in order, and the cursor moved
 * past them. Reads only the rows of the steps from the cursor's on.
 */
export const readEvents = (db: Executor, cursor: EventCursor): Effect.Effect<RunStreamEvent[], StoreError> =>
  Effect.gen(function* () {
    const { runId } = cursor
    const transitions = yield* listTransitions(db, runId, cursor.nextSeq)
    if (transitions.length === 0) return []
    const fromStep = cursor.step
    const [attempts, steps, approvals, children] = yield* Effect.all(
      [listAttempts(db, runId, fromStep), listSteps(db, runId, fromStep), listApprovals(db, runId, undefined, fromStep), listRuns(db, { parentId: runId })],
      { concurrency: 'unbounded' }
    )
    const rows: EventRows = { attempts, steps, approvals, children }
    const out: RunStreamEvent[] = []
    for (const t of transitions) {
      const emit = t.seq >= cursor.fromSeq
      const read: TransitionRead = {
        cursor,
        t,
        rows,
        push: (event) => {
          if (emit) out.push(event)
        }
      }
      const answer = isAnswer(t)
      // The answer's text, whole, where its streamed pieces would have come: before its transition.
      if (answer) answerText(read)
      read.push({ kind: 'transition', runId, seq: t.seq, at: t.at, from: t.from_state, event: t.event, to: t.to_state })
      if (answer) answerEvents(read)
      EVENT_READERS.get(t.event)?.(read)
      if (t.to_state.startsWith('finished.')) {
        cursor.ended = true
        const run = yield* getRunRow(db, runId)
        for (const event of endEvents(read, run)) read.push(event)
      }
      cursor.nextSeq = t.seq + 1
    }
    return out
  })
