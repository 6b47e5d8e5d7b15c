import type { RunError, Usage } from '@agentvisor/core'
import type { PendingRequest } from '../approval/pending-request.js'

// A run's events (docs/streaming.md): what happened to it, one JSON object each, in order. Every
// event but `text` is durable and carries the `seq` of the transition it belongs to: replayed from
// the store, or heard live, a run's events are the same list, so a reader that resumes from the
// seq after the last one it saw gets each event once. `text` events are the model's answer, just
// before the transition that records it: its pieces as they stream (or the whole, from a provider
// that does not stream) to a reader who listens live, else the answer's text whole, read here from
// its step: each call's text reaches a reader once.

interface EventBase {
  readonly runId: string
  /** ISO-8601: when the fact was recorded (a text delta: when it arrived). */
  readonly at: string
}

/** A durable event: it belongs to the transition `seq`. */
interface Durable extends EventBase {
  readonly seq: number
}

export type RunStreamEvent =
  | (Durable & { readonly kind: 'transition'; readonly from: string; readonly event: string; readonly to: string })
  | (EventBase & { readonly kind: 'text'; readonly step: number; readonly attempt: number; readonly delta: string })
  | (Durable & {
      readonly kind: 'attempt'
      readonly step: number
      readonly attempt: number
      readonly provider: string
      readonly reason: string
      readonly outcome: string
      readonly errorKind?: string
      readonly httpStatus?: number
      readonly latencyMs?: number
      readonly tokensIn?: number
      readonly tokensOut?: number
    })
  | (Durable & { readonly kind: 'toolCall'; readonly step: number; readonly callId: string; readonly name: string; readonly arguments: unknown })
  | (Durable & { readonly kind: 'toolResult'; readonly step: number; readonly callId: string; readonly name: string; readonly output: string })
  | (Durable & { readonly kind: 'approvalRequested'; readonly request: PendingRequest })
  | (Durable & { readonly kind: 'inputRequested'; readonly request: PendingRequest })
  | (Durable & { readonly kind: 'child'; readonly childId: string; readonly goal: string; readonly status: string })
  | (Durable & { readonly kind: 'usage'; readonly usage: Usage })
  | (Durable & {
      /** A stall rule warned the model (`warned`) or ended the run (`stalled`): docs/task-file.md, "Stalls". */
      readonly kind: 'stall'
      readonly step: number
      readonly phase: 'warned' | 'stalled'
      /** Which rule warned: the same call repeated, or steps without progress (absent for `stalled`: see `message`). */
      readonly rule?: 'repeat' | 'noProgress'
      /** The repeated call's tool (a `repeat` warning). */
      readonly name?: string
      readonly message: string
    })
  | (Durable & {
      readonly kind: 'done'
      readonly status: string
      readonly steps: number
      readonly output?: unknown
      readonly usage: Usage
      readonly error?: RunError
    })

export type RunStreamEventKind = RunStreamEvent['kind']
