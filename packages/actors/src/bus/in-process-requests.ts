import { Effect, type Scope } from 'effect'
import type { BusRequests, ControlHandler, SubmitHandler } from '../protocol/bus.js'
import { BusError, NO_SUBMIT_RESPONDERS } from '../protocol/bus.js'
import { type LogLine, stderrLog } from '../loop/survive.js'
import { answerControl, answerSubmit, encodeControlReply } from './control-answer.js'
import { bytesToText, decodeControlReply, encodeControlBody } from './wire.js'

/** A handler served, with where its failures are logged. */
interface Served<H> {
  readonly handler: H
  readonly log: LogLine
}

/**
 * The handlers serving one kind of request (control, submit), each request going to the next in
 * turn, as a NATS queue group hands them out.
 */
interface HandlerRing<H> {
  /** Serves `handler` until the scope closes. Each registration is its own entry, so one handler served twice is removed once. */
  readonly serve: (handler: H, log: LogLine | undefined) => Effect.Effect<void, never, Scope.Scope>
  /** The handler whose turn it is; undefined when nobody serves. */
  readonly pick: () => Served<H> | undefined
}

const handlerRing = <H>(): HandlerRing<H> => {
  const served: Array<Served<H>> = []
  let next = 0
  return {
    serve: (handler, log) =>
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
    pick: () => {
      if (served.length === 0) return undefined
      const index = next % served.length
      next = index + 1
      return served[index]
    }
  }
}

/**
 * The embedded bus's requests: control and submit answered in the process by the handlers that
 * serve them, in turn, the body and the reply going through their JSON text as over NATS.
 */
export const makeInProcessRequests = (): BusRequests => {
  const controlHandlers = handlerRing<ControlHandler>()
  const submitHandlers = handlerRing<SubmitHandler>()

  const submit: BusRequests['submit'] = (body, timeoutMs = 5_000) =>
    Effect.gen(function* () {
      const payload = yield* encodeControlBody(body)
      const served = submitHandlers.pick()
      if (served === undefined) return yield* Effect.fail(new BusError({ message: NO_SUBMIT_RESPONDERS }))
      const reply = yield* answerSubmit(served.handler, typeof payload === 'string' ? payload : bytesToText(payload), served.log).pipe(
        Effect.timeoutFail({ duration: timeoutMs, onTimeout: () => new BusError({ message: `submit timed out after ${timeoutMs}ms` }) })
      )
      return yield* decodeControlReply(encodeControlReply(reply))
    })

  const control: BusRequests['control'] = (runId, verb, body, timeoutMs = 5_000) =>
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
    serveControl: (handler, serveOptions) => controlHandlers.serve(handler, serveOptions?.log),
    serveSubmit: (handler, serveOptions) => submitHandlers.serve(handler, serveOptions?.log),
    submit,
    control
  }
}
