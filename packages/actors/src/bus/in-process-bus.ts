import { Effect, FiberSet, type Scope } from 'effect'
import type { Bus, ChildDelivery, ConsumeOptions, ControlHandler, SubmitHandler } from '../protocol/bus.js'
import { BusError, NO_SUBMIT_RESPONDERS, serveDelivery } from '../protocol/bus.js'
import { type LogLine, stderrLog } from '../loop/survive.js'
import { answerControl, answerSubmit, encodeControlReply } from './control-answer.js'
import type { ChildRunRequest, RunDoneMessage, RunEventMessage, RunRequestMessage, RunStartedMessage } from '../protocol/messages.js'
import { bytesToText, decodeControlReply, encodeControlBody, encodeJson } from './wire.js'

/** Options of {@link makeInProcessBus}. */
export interface InProcessBusOptions {
  /** How long a delivery may go unacked (without `working`) before it is delivered again. */
  readonly ackWaitMs?: number
}

const DEFAULT_ACK_WAIT_MS = 30_000

type Run = (effect: Effect.Effect<void>) => unknown

interface Consumer {
  readonly handle: (delivery: ChildDelivery) => Effect.Effect<void, unknown>
  readonly options: ConsumeOptions
  readonly concurrency: number
  readonly run: Run
  active: number
}

interface Entry {
  readonly request: ChildRunRequest
  state: 'queued' | 'in-flight'
  deliveries: number
  /** Bumped on each delivery so a late ack, nak or working from an older one is ignored. */
  generation: number
  timer: ReturnType<typeof setTimeout> | undefined
}

// Values cross the bus as JSON so that subscribers see what they would over NATS (no shared
// references, no `undefined` fields, dates as strings).
const viaJson = <A>(value: A): A | undefined => {
  const text = encodeJson(value)
  return text === undefined ? undefined : (JSON.parse(text) as A)
}

const notify = <A>(listener: (message: A) => void, message: A): void => {
  try {
    listener(message)
  } catch {
    // A listener that throws must not stop the publisher or the other listeners.
  }
}

/**
 * The handlers serving one kind of request (control, submit), each request going to the next in
 * turn, as a NATS queue group hands them out. Each registration is its own entry, so one handler
 * served twice is removed once.
 */
const handlerRing = <H>() => {
  const served: Array<{ readonly handler: H; readonly log: LogLine }> = []
  let next = 0
  return {
    serve: (handler: H, log: LogLine | undefined): Effect.Effect<void, never, Scope.Scope> =>
      Effect.acquireRelease(
        Effect.sync(() => {
          const entry = { handler, log: log ?? stderrLog }
          served.push(entry)
          return entry
        }),
        (entry) =>
          Effect.sync(() => {
            const index = served.indexOf(entry)
            if (index !== -1) served.splice(index, 1)
          })
      ).pipe(Effect.asVoid),
    pick: (): { readonly handler: H; readonly log: LogLine } | undefined => {
      if (served.length === 0) return undefined
      const index = next % served.length
      next = index + 1
      return served[index]
    }
  }
}

/**
 * The embedded bus: child runs, events, results and control in one process, with the same
 * delivery rules as NATS (each request to one consumer, redelivery after `ackWaitMs` without an
 * ack, `nak` hands it back at once, resubmitting a queued or running run id is a no-op).
 */
export const makeInProcessBus = (options: InProcessBusOptions = {}): Bus => {
  const ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS
  const entries = new Map<string, Entry>()
  const queue: Entry[] = []
  const consumers: Consumer[] = []
  let nextConsumer = 0
  let dispatchScheduled = false
  const doneListeners = new Set<(message: RunDoneMessage) => void>()
  const eventListeners = new Set<{ readonly runId: string; readonly onEvent: (message: RunEventMessage) => void }>()
  const controlHandlers = handlerRing<ControlHandler>()
  const submitHandlers = handlerRing<SubmitHandler>()

  const isCurrent = (entry: Entry, generation: number): boolean =>
    entries.get(entry.request.runId) === entry && entry.state === 'in-flight' && entry.generation === generation

  const clearTimer = (entry: Entry): void => {
    if (entry.timer !== undefined) clearTimeout(entry.timer)
    entry.timer = undefined
  }

  // Redeliveries go first, as JetStream serves its redelivery queue before new messages.
  const requeue = (entry: Entry): void => {
    clearTimer(entry)
    entry.state = 'queued'
    queue.unshift(entry)
    scheduleDispatch()
  }

  const armTimer = (entry: Entry, generation: number): void => {
    clearTimer(entry)
    entry.timer = setTimeout(() => {
      if (isCurrent(entry, generation)) requeue(entry)
    }, ackWaitMs)
    // An unacked delivery must not keep the process alive on its own.
    entry.timer.unref()
  }

  const pickConsumer = (): Consumer | undefined => {
    for (let i = 0; i < consumers.length; i++) {
      const index = (nextConsumer + i) % consumers.length
      const consumer = consumers[index]
      if (consumer !== undefined && consumer.active < consumer.concurrency) {
        nextConsumer = index + 1
        return consumer
      }
    }
    return undefined
  }

  const deliver = (consumer: Consumer, entry: Entry): void => {
    entry.state = 'in-flight'
    entry.deliveries += 1
    entry.generation += 1
    const generation = entry.generation
    armTimer(entry, generation)
    consumer.active += 1
    const delivery: ChildDelivery = {
      request: entry.request,
      deliveryCount: entry.deliveries,
      working: Effect.sync(() => {
        if (isCurrent(entry, generation)) armTimer(entry, generation)
      }),
      ack: Effect.sync(() => {
        if (!isCurrent(entry, generation)) return
        clearTimer(entry)
        entries.delete(entry.request.runId)
      }),
      nak: Effect.sync(() => {
        if (isCurrent(entry, generation)) requeue(entry)
      }),
      // JetStream's `term`: like an ack, the request is gone for good.
      term: Effect.sync(() => {
        if (!isCurrent(entry, generation)) return
        clearTimer(entry)
        entries.delete(entry.request.runId)
      })
    }
    consumer.run(
      serveDelivery(delivery, ackWaitMs, consumer.handle, consumer.options).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            consumer.active -= 1
            scheduleDispatch()
          })
        )
      )
    )
  }

  // Dispatch runs on its own turn of the event loop: a handler that naks at once must not
  // recurse into another delivery on the same stack, nor starve I/O.
  function scheduleDispatch(): void {
    if (dispatchScheduled) return
    dispatchScheduled = true
    setImmediate(() => {
      dispatchScheduled = false
      for (;;) {
        const entry = queue[0]
        if (entry === undefined) return
        const consumer = pickConsumer()
        if (consumer === undefined) return
        queue.shift()
        deliver(consumer, entry)
      }
    })
  }

  const submitChild: Bus['submitChild'] = (request) =>
    Effect.suspend(() => {
      if (entries.has(request.runId)) return Effect.void
      const copy = viaJson(request)
      if (copy === undefined) return Effect.fail(new BusError({ message: `child run ${request.runId} cannot be encoded as JSON` }))
      const entry: Entry = { request: copy, state: 'queued', deliveries: 0, generation: 0, timer: undefined }
      entries.set(request.runId, entry)
      queue.push(entry)
      scheduleDispatch()
      return Effect.void
    })

  const consumeChildren: Bus['consumeChildren'] = (handle, options) =>
    Effect.gen(function* () {
      const { concurrency } = options
      if (!Number.isInteger(concurrency) || concurrency < 1) {
        return yield* Effect.fail(new BusError({ message: `concurrency must be a positive integer, got ${concurrency}` }))
      }
      // The fiber set is released last, so the consumer stops taking work before its handlers
      // are interrupted.
      const run = yield* FiberSet.makeRuntime<never, void, never>()
      const consumer: Consumer = { handle, options, concurrency, run, active: 0 }
      consumers.push(consumer)
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          const index = consumers.indexOf(consumer)
          if (index !== -1) consumers.splice(index, 1)
        })
      )
      scheduleDispatch()
    })

  // Delivered when called, synchronously: a run's every transition is published, and with
  // nobody listening (the usual case) that must cost nothing (docs/architecture.md, "The hot path").
  const publishEvent: Bus['publishEvent'] = (message) => {
    if (eventListeners.size === 0) return Effect.void
    const copy = viaJson(message)
    if (copy === undefined) return Effect.void
    for (const listener of eventListeners) if (listener.runId === message.runId) notify(listener.onEvent, copy)
    return Effect.void
  }

  const startedListeners = new Set<(message: RunStartedMessage) => void>()
  const requestListeners = new Set<(message: RunRequestMessage) => void>()
  const publishTo =
    <A>(listeners: Set<(message: A) => void>) =>
    (message: A): Effect.Effect<void> =>
      Effect.sync(() => {
        if (listeners.size === 0) return
        const copy = viaJson(message)
        if (copy !== undefined) for (const listener of listeners) notify(listener, copy)
      })
  const watchOn =
    <A>(listeners: Set<(message: A) => void>) =>
    (listener: (message: A) => void): Effect.Effect<void, never, Scope.Scope> =>
      Effect.acquireRelease(
        Effect.sync(() => listeners.add(listener)),
        () => Effect.sync(() => listeners.delete(listener))
      ).pipe(Effect.asVoid)

  const publishDone: Bus['publishDone'] = (message) =>
    Effect.sync(() => {
      const copy = viaJson(message)
      if (copy === undefined) return
      for (const listener of doneListeners) notify(listener, copy)
    })

  const watchDone: Bus['watchDone'] = (onDone) =>
    Effect.acquireRelease(
      Effect.sync(() => doneListeners.add(onDone)),
      () => Effect.sync(() => doneListeners.delete(onDone))
    ).pipe(Effect.asVoid)

  const watchEvents: Bus['watchEvents'] = (runId, onEvent) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        const listener = { runId, onEvent }
        eventListeners.add(listener)
        return listener
      }),
      (listener) => Effect.sync(() => eventListeners.delete(listener))
    ).pipe(Effect.asVoid)

  const serveControl: Bus['serveControl'] = (handler, serveOptions) => controlHandlers.serve(handler, serveOptions?.log)

  const serveSubmit: Bus['serveSubmit'] = (handler, serveOptions) => submitHandlers.serve(handler, serveOptions?.log)

  const submit: Bus['submit'] = (body, timeoutMs = 5_000) =>
    Effect.gen(function* () {
      const payload = yield* encodeControlBody(body)
      const served = submitHandlers.pick()
      if (served === undefined) return yield* Effect.fail(new BusError({ message: NO_SUBMIT_RESPONDERS }))
      const reply = yield* answerSubmit(served.handler, typeof payload === 'string' ? payload : bytesToText(payload), served.log).pipe(
        Effect.timeoutFail({ duration: timeoutMs, onTimeout: () => new BusError({ message: `submit timed out after ${timeoutMs}ms` }) })
      )
      return yield* decodeControlReply(encodeControlReply(reply))
    })

  const control: Bus['control'] = (runId, verb, body, timeoutMs = 5_000) =>
    Effect.gen(function* () {
      const payload = yield* encodeControlBody(body)
      const served = controlHandlers.pick()
      if (served === undefined) {
        return yield* Effect.fail(new BusError({ message: `no responders for control ${verb} of run ${runId}` }))
      }
      const text = typeof payload === 'string' ? payload : bytesToText(payload)
      const reply = yield* answerControl(served.handler, runId, verb, text, served.log).pipe(
        Effect.timeoutFail({
          duration: timeoutMs,
          onTimeout: () => new BusError({ message: `control ${verb} of run ${runId} timed out after ${timeoutMs}ms` })
        })
      )
      // The reply goes through its JSON text, as it would over NATS.
      return yield* decodeControlReply(encodeControlReply(reply))
    })

  return {
    kind: 'in-process',
    submitChild,
    consumeChildren,
    publishEvent,
    publishDone,
    watchDone,
    watchEvents,
    // In one process, `events()` reads a run's events where they are made: nothing travels.
    checkWorkQueue: Effect.void,
    publishStream: () => Effect.void,
    watchStream: () => Effect.void,
    publishStarted: publishTo(startedListeners),
    watchStarted: watchOn(startedListeners),
    publishRequest: publishTo(requestListeners),
    watchRequests: watchOn(requestListeners),
    serveControl,
    control,
    serveSubmit,
    submit
  }
}
