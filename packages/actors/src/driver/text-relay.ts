import type { RunContext } from '../machine/run-machine.js'
import { iso } from '../supervisor/driver-io.js'
import { listens, notify } from '../supervisor/run-observer.js'
import type { Drive } from './drive.js'

/** What a call streams to observers: `onText` for the adapter, `flush` once the answer is in. */
export interface TextRelay {
  readonly onText: (delta: string) => void
  readonly flush: () => void
}

/**
 * Hands a streamed answer's text to the run's `onText` observers as it arrives (docs/streaming.md),
 * never a key: with secrets known, text is held back to the last space or line break (no key has
 * one) and redacted as a whole up to there; with a secret that has one, all of it until the answer
 * is in. Undefined when nobody listens: the adapter is not asked to report pieces.
 */
export const textRelay = (drive: Drive, ctx: RunContext): TextRelay | undefined => {
  const { runId, observers, secrets } = drive.deps
  if (!listens(observers, 'onText')) return undefined
  // The transition into this dispatch is durable: the text comes after it and before the answer's.
  const afterSeq = drive.journal.seq
  const { step, attempt } = ctx
  const emit = (delta: string): void => {
    if (delta !== '') notify(observers, 'onText', { runId, step, attempt, afterSeq, delta, at: iso(drive.now()) })
  }
  if (secrets === undefined || secrets.isEmpty) return { onText: emit, flush: () => undefined }
  let held = ''
  return {
    onText: (delta) => {
      held += delta
      if (secrets.hasWhitespace) return
      const cut = Math.max(held.lastIndexOf(' '), held.lastIndexOf('\n'), held.lastIndexOf('\t'))
      if (cut < 0) return
      emit(secrets.redact(held.slice(0, cut + 1)))
      held = held.slice(cut + 1)
    },
    flush: () => {
      emit(secrets.redact(held))
      held = ''
    }
  }
}
