import type { Scope } from 'effect'
import { Context, Data, Effect } from 'effect'
import type { ChildRunRequest, ControlReply, ControlVerb, RunDoneMessage, RunEventMessage } from './messages.js'

/** The bus could not be reached or refused an operation. */
export class BusError extends Data.TaggedError('BusError')<{ readonly message: string; readonly cause?: unknown }> {}

/** A child-run request handed to a worker; it stays owned (and is redelivered if lost) until acked. */
export interface ChildDelivery {
  readonly request: ChildRunRequest
  /** How many times it was delivered (1 the first time; more after a worker died). */
  readonly deliveryCount: number
  /** Extends the ack deadline while the worker still drives the child. */
  readonly working: Effect.Effect<void>
  /** Done with it: it will not be delivered again. */
  readonly ack: Effect.Effect<void>
  /** Hands it back at once for another worker (e.g. a worker shutting down). */
  readonly nak: Effect.Effect<void>
}

/**
 * Runs `handle` on `delivery`, reporting the delivery in progress every third of the ack
 * deadline until the handler ends, whatever the handler's own pace: a request whose handler is
 * alive (a child being driven) is never handed to another worker, or to another slot of this
 * one. A handler that dies, or is interrupted with its worker, stops reporting, and its request
 * comes back after the deadline. Both buses run their handlers through this.
 */
export const handleInProgress = (
  delivery: ChildDelivery,
  ackWaitMs: number,
  handle: (delivery: ChildDelivery) => Effect.Effect<void>
): Effect.Effect<void> => {
  const everyMs = Math.max(50, Math.floor(ackWaitMs / 3))
  return Effect.scoped(
    Effect.zipRight(Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(everyMs), delivery.working))), Effect.suspend(() => handle(delivery)))
  )
}

/** Answers control requests (docs/nats.md). `body` is the raw payload text; replies are objects. */
export type ControlHandler = (runId: string, verb: ControlVerb, body: string) => Effect.Effect<ControlReply>

/**
 * How runs travel between processes. Two implementations pass one shared test suite: the
 * in-process bus (the embedded default: everything in one process) and NATS (JetStream work
 * queue for child runs, plain subjects for events and results, request/reply for control).
 */
export interface Bus {
  readonly kind: 'in-process' | 'nats'
  /** Enqueues a child run for any worker; submitting the same run id twice enqueues it once. */
  readonly submitChild: (request: ChildRunRequest) => Effect.Effect<void, BusError>
  /**
   * Delivers child-run requests to `handle`, up to `concurrency` at a time, until the scope
   * closes. All consumers share one queue: each request goes to one of them; one that is never
   * acked is delivered again (to any consumer) after the ack deadline.
   */
  readonly consumeChildren: (
    handle: (delivery: ChildDelivery) => Effect.Effect<void>,
    options: { readonly concurrency: number }
  ) => Effect.Effect<void, BusError, Scope.Scope>
  /** Publishes a transition; best effort (a run never fails because nobody listens). */
  readonly publishEvent: (message: RunEventMessage) => Effect.Effect<void>
  /** Publishes how a run ended or paused; best effort. */
  readonly publishDone: (message: RunDoneMessage) => Effect.Effect<void>
  /** Calls `onDone` for each done message of any run until the scope closes. */
  readonly watchDone: (onDone: (message: RunDoneMessage) => void) => Effect.Effect<void, BusError, Scope.Scope>
  /** Calls `onEvent` for each transition of `runId` until the scope closes. */
  readonly watchEvents: (runId: string, onEvent: (message: RunEventMessage) => void) => Effect.Effect<void, BusError, Scope.Scope>
  /** Answers control requests for every run until the scope closes (workers share them). */
  readonly serveControl: (handler: ControlHandler) => Effect.Effect<void, BusError, Scope.Scope>
  /** Sends a control request and waits for the reply (`timeoutMs`, then `BusError`). */
  readonly control: (runId: string, verb: ControlVerb, body: unknown, timeoutMs?: number) => Effect.Effect<ControlReply, BusError>
}

/** The bus as an Effect service. */
export class BusService extends Context.Tag('agentvisor/Bus')<BusService, Bus>() {}
