import type { RunStreamEvent } from '../protocol/run-stream-event.js'
import type { Scope } from 'effect'
import { Cause, Context, Data, Effect, Schedule } from 'effect'
import { causeLine, type LogLine, stderrLog } from '../loop/survive.js'
import type { ChildRunRequest, ControlReply, ControlVerb, RunDoneMessage, RunEventMessage, RunRequestMessage, RunStartedMessage } from './messages.js'

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
  /** Gives up on it: it will not be delivered again (JetStream `term`; the in-process bus drops it). */
  readonly term: Effect.Effect<void>
}

/**
 * How many times the handling of one child-run request may fail (a store error, a defect)
 * before it is given up on: its run ends `failed` and the request is terminated instead of
 * redelivered forever (docs/nats.md, "When handling a request fails").
 */
export const MAX_CHILD_HANDLING_FAILURES = 5

/** How a worker consumes child-run requests. */
export interface ConsumeOptions {
  readonly concurrency: number
  /** One line per failure the consumer survives (default stderr). */
  readonly log?: LogLine | undefined
  /**
   * Ends the run of a request given up on (the worker writes it `failed` with the cause). If it
   * fails too, the request is handed back rather than terminated: a run is never left without
   * either a request or an end.
   */
  readonly giveUp?: ((request: ChildRunRequest, cause: Cause.Cause<unknown>) => Effect.Effect<void, unknown>) | undefined
  /** The pause after a first failed try, doubling after each (default 1000 ms, at most 30 s). */
  readonly retryBaseMs?: number | undefined
}

const DEFAULT_RETRY_BASE_MS = 1_000
const MAX_RETRY_PAUSE = '30 seconds'

/**
 * Handles one delivery the way every bus does: kept in progress while its handler runs
 * (`handleInProgress`); a handler that fails or dies is logged with its cause and tried again
 * in the same delivery, up to {@link MAX_CHILD_HANDLING_FAILURES} tries on an exponential
 * schedule; then the run is given up on (`giveUp`) and the request terminated. An interrupted
 * handler (its worker going away) leaves the request to the ack deadline, as a crashed process
 * would. The consumer goes on serving other requests whatever happened.
 */
export const serveDelivery = (
  delivery: ChildDelivery,
  ackWaitMs: number,
  handle: (delivery: ChildDelivery) => Effect.Effect<void, unknown>,
  options: ConsumeOptions
): Effect.Effect<void> => {
  const log = options.log ?? stderrLog
  const { runId } = delivery.request
  let failures = 0
  const schedule = Schedule.exponential(options.retryBaseMs ?? DEFAULT_RETRY_BASE_MS).pipe(
    Schedule.union(Schedule.spaced(MAX_RETRY_PAUSE)),
    Schedule.intersect(Schedule.recurs(MAX_CHILD_HANDLING_FAILURES - 1))
  )
  const tries = Effect.sandbox(Effect.suspend(() => handle(delivery))).pipe(
    Effect.tapError((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.void
        : Effect.sync(() => {
            failures += 1
            log(`child run ${runId}: handling failed (${failures} of ${MAX_CHILD_HANDLING_FAILURES}): ${causeLine(cause)}`)
          })
    ),
    Effect.retry({ schedule, while: (cause) => !Cause.isInterruptedOnly(cause) })
  )
  const gaveUp = (cause: Cause.Cause<unknown>): Effect.Effect<void> =>
    Effect.suspend(() => (options.giveUp === undefined ? Effect.void : options.giveUp(delivery.request, cause))).pipe(
      Effect.zipRight(delivery.term),
      Effect.zipRight(Effect.sync(() => log(`child run ${runId}: given up after ${MAX_CHILD_HANDLING_FAILURES} failed tries`))),
      Effect.catchAllCause((failed) =>
        Effect.zipRight(
          Effect.sync(() => log(`child run ${runId}: cannot give it up, handing it back: ${causeLine(failed)}`)),
          delivery.nak
        )
      )
    )
  return handleInProgress(delivery, ackWaitMs, () => Effect.catchAll(tries, (cause) => (Cause.isInterruptedOnly(cause) ? Effect.interrupt : gaveUp(cause))))
}

/**
 * Runs `handle` on `delivery`, reporting the delivery in progress every third of the ack
 * deadline until the handler ends, whatever the handler's own pace: a request whose handler is
 * alive (a child being driven) is never handed to another worker, or to another slot of this
 * one. A handler that dies, or is interrupted with its worker, stops reporting, and its request
 * comes back after the deadline. Both buses run their handlers through this.
 */
export const handleInProgress = (delivery: ChildDelivery, ackWaitMs: number, handle: (delivery: ChildDelivery) => Effect.Effect<void>): Effect.Effect<void> => {
  const everyMs = Math.max(50, Math.floor(ackWaitMs / 3))
  return Effect.scoped(
    Effect.zipRight(
      Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(everyMs), delivery.working))),
      Effect.suspend(() => handle(delivery))
    )
  )
}

/** Answers control requests (docs/nats.md). `body` is the raw payload text; replies are objects. */
export type ControlHandler = (runId: string, verb: ControlVerb, body: string) => Effect.Effect<ControlReply>

/** What a submitter hears when no worker takes submitted runs. */
export const NO_SUBMIT_RESPONDERS = 'no worker takes submitted runs: start one with --submit-template FILE (docs/nats.md, "Submitting runs")'

/** Takes a root run submitted on `agentvisor.runs.submit` (docs/nats.md): the raw body text in, the reply out. */
export type SubmitHandler = (body: string) => Effect.Effect<ControlReply>

/**
 * How runs travel between processes. Two implementations pass one shared test suite: the
 * in-process bus (the embedded default: everything in one process) and NATS (JetStream work
 * queue for child runs, plain subjects for events and results, request/reply for control). Each
 * is made of three parts, one module each: its child-run queue, its broadcasts, its requests.
 */
export interface Bus extends BusChildQueue, BusBroadcasts, BusRequests {
  readonly kind: 'in-process' | 'nats'
}

/** The part of a bus that hands child runs to workers: each request to one consumer, redelivered until acked. */
export interface BusChildQueue {
  /** Enqueues a child run for any worker; submitting the same run id twice enqueues it once. */
  readonly submitChild: (request: ChildRunRequest) => Effect.Effect<void, BusError>
  /**
   * Delivers child-run requests to `handle`, up to `concurrency` at a time, until the scope
   * closes. All consumers share one queue: each request goes to one of them; one that is never
   * acked is delivered again (to any consumer) after the ack deadline.
   */
  readonly consumeChildren: (
    handle: (delivery: ChildDelivery) => Effect.Effect<void, unknown>,
    options: ConsumeOptions
  ) => Effect.Effect<void, BusError, Scope.Scope>
  /**
   * Fails with `BusError` when the child-run work queue cannot be had (a NATS server without
   * JetStream, a stream of another kind): what a worker checks before it serves (docs/nats.md).
   */
  readonly checkWorkQueue: Effect.Effect<void, BusError>
}

/** The part of a bus that tells whoever listens: best-effort publications, and the watches that hear them. */
export interface BusBroadcasts {
  /**
   * Publishes a transition; best effort (a run never fails because nobody listens). The
   * in-process bus delivers as it is called (its Effect is `Effect.void`); NATS when it runs.
   */
  readonly publishEvent: (message: RunEventMessage) => Effect.Effect<void>
  /**
   * Publishes one of a run's events (docs/streaming.md) on `agentvisor.runs.<id>.stream`; best
   * effort. NATS only: in one process `events()` reads them where they are made.
   */
  readonly publishStream: (runId: string, event: RunStreamEvent) => Effect.Effect<void>
  /** Calls `onEvent` for each event of `runId` published on its stream until the scope closes. */
  readonly watchStream: (runId: string, onEvent: (event: RunStreamEvent) => void) => Effect.Effect<void, BusError, Scope.Scope>
  /** Publishes that a driver took a run (`agentvisor.runs.<id>.started`); best effort. */
  readonly publishStarted: (message: RunStartedMessage) => Effect.Effect<void>
  /** Calls `onStarted` for every run a driver takes anywhere, until the scope closes. */
  readonly watchStarted: (onStarted: (message: RunStartedMessage) => void) => Effect.Effect<void, BusError, Scope.Scope>
  /** Publishes a request a run paused on (`agentvisor.requests`); best effort. */
  readonly publishRequest: (message: RunRequestMessage) => Effect.Effect<void>
  /** Calls `onRequest` for every request any run pauses on, until the scope closes. */
  readonly watchRequests: (onRequest: (message: RunRequestMessage) => void) => Effect.Effect<void, BusError, Scope.Scope>
  /** Publishes how a run ended or paused; best effort. */
  readonly publishDone: (message: RunDoneMessage) => Effect.Effect<void>
  /** Calls `onDone` for each done message of any run until the scope closes. */
  readonly watchDone: (onDone: (message: RunDoneMessage) => void) => Effect.Effect<void, BusError, Scope.Scope>
  /** Calls `onEvent` for each transition of `runId` until the scope closes. */
  readonly watchEvents: (runId: string, onEvent: (message: RunEventMessage) => void) => Effect.Effect<void, BusError, Scope.Scope>
}

/** The part of a bus that asks and answers: control requests and submitted runs, each answered by one server. */
export interface BusRequests {
  /**
   * Answers control requests for every run until the scope closes (workers share them); a
   * handler that dies is answered `internal error` and logged on `log` (default stderr).
   */
  readonly serveControl: (
    handler: ControlHandler,
    options?: {
      readonly log?: LogLine | undefined
      /**
       * Only this run's requests, as the process that drives it answers them (docs/nats.md):
       * on its own subject, outside the workers' queue group, so a worker answers too when one
       * runs. NATS only; the in-process bus serves every run from one handler anyway.
       */
      readonly runId?: string | undefined
    }
  ) => Effect.Effect<void, BusError, Scope.Scope>
  /**
   * Takes root runs submitted on `agentvisor.runs.submit` until the scope closes; the workers
   * that serve it share the requests (each goes to one). A handler that dies is answered
   * `internal error` and logged.
   */
  readonly serveSubmit: (handler: SubmitHandler, options?: { readonly log?: LogLine | undefined }) => Effect.Effect<void, BusError, Scope.Scope>
  /** Submits a root run (`{v, contract, runId?, traceparent?}`) and waits for the reply (`timeoutMs`, then `BusError`). */
  readonly submit: (body: unknown, timeoutMs?: number) => Effect.Effect<ControlReply, BusError>
  /** Sends a control request and waits for the reply (`timeoutMs`, then `BusError`). */
  readonly control: (runId: string, verb: ControlVerb, body: unknown, timeoutMs?: number) => Effect.Effect<ControlReply, BusError>
}

/** The bus as an Effect service. */
export class BusService extends Context.Tag('agentvisor/Bus')<BusService, Bus>() {}
