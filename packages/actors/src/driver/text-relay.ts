import { keepPartialText } from '@agentvisor/store'
import { Effect } from 'effect'
import type { RunContext } from '../machine/run-machine.js'
import { iso } from './now.js'
import { listens, notify } from './run-observer.js'
import type { Drive } from './drive.js'

/** What a call streams to observers: `onText` for the adapter, `flush` once the answer is in. */
export interface TextRelay {
  readonly onText: (delta: string) => void
  /**
   * Once the call is answered (or failed): what is still held goes out. `answer` is the answer's
   * text as the run keeps it (redacted): handed on as one piece when the adapter streamed none of
   * it (a provider that does not stream), so every answer's text reaches the readers.
   */
  readonly flush: (answer?: string) => void
}

/**
 * Hands a streamed answer's text to the run's `onText` observers as it arrives (docs/streaming.md),
 * and an answer that did not stream as one piece once it is in, never a key: with secrets known, text is held back to the last space or line break (no key has
 * one) and redacted as a whole up to there; with a secret that has one, all of it until the answer
 * is in. Undefined when nobody listens: the adapter is not asked to report pieces.
 */
export const textRelay = (drive: Drive, ctx: RunContext): TextRelay | undefined => {
  const { runId, observers, secrets } = drive.deps
  if (!listens(observers, 'onText')) return undefined
  // The transition into this dispatch is durable: the text comes after it and before the answer's.
  const afterSeq = drive.journal.seq
  const { step, attempt } = ctx
  const partial = partialTextKeeper(drive, ctx)
  const relay = (delta: string): void => notify(observers, 'onText', { runId, step, attempt, afterSeq, delta, at: iso(drive.now()) })
  const emit = (delta: string): void => {
    if (delta === '') return
    relay(delta)
    partial.add(delta)
  }
  let streamed = false
  // A whole answer is in its step row already: it is not kept as partial text.
  const whole = (answer: string | undefined): void => {
    if (!streamed && answer !== undefined && answer !== '') relay(answer)
  }
  if (secrets === undefined || secrets.isEmpty)
    return {
      onText: (delta) => {
        streamed = true
        emit(delta)
      },
      flush: whole
    }
  let held = ''
  return {
    onText: (delta) => {
      streamed = true
      held += delta
      if (secrets.hasWhitespace) return
      const cut = Math.max(held.lastIndexOf(' '), held.lastIndexOf('\n'), held.lastIndexOf('\t'))
      if (cut < 0) return
      emit(secrets.redact(held.slice(0, cut + 1)))
      held = held.slice(cut + 1)
    },
    flush: (answer) => {
      emit(secrets.redact(held))
      held = ''
      whole(answer)
    }
  }
}

/** How often the text of a call still streaming is written to its receipt, at most. */
export const PARTIAL_TEXT_EVERY_MS = 250

/**
 * Keeps what a call has streamed so far in its receipt's `partial_text` while it streams, at most
 * every `PARTIAL_TEXT_EVERY_MS` (docs/streaming.md, "Text"): a driver killed mid-stream leaves the
 * text it had shown, which `show` reports with the receipt a resume settles `unknown`. The write
 * touches only a receipt still `pending` (a takeover settles it first), is never awaited by the
 * call, and a failing one is logged and the call goes on.
 */
const partialTextKeeper = (drive: Drive, ctx: RunContext) => {
  const { runId, db } = drive.deps
  const { step, attempt } = ctx
  let text = ''
  let writtenAt = drive.now()
  let writing = false
  return {
    add: (delta: string): void => {
      text += delta
      const now = drive.now()
      if (writing || now - writtenAt < PARTIAL_TEXT_EVERY_MS) return
      writing = true
      writtenAt = now
      Effect.runFork(
        keepPartialText(db, runId, step, attempt, text).pipe(
          Effect.catchAll((error) => Effect.sync(() => drive.deps.warn?.(`run ${runId}: cannot keep the streamed text of step ${step}: ${error.message}`))),
          Effect.ensuring(
            Effect.sync(() => {
              writing = false
            })
          )
        )
      )
    }
  }
}
