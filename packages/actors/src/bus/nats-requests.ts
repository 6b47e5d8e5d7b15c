import type { Msg, NatsConnection } from '@nats-io/transport-node'
import { RequestError, TimeoutError } from '@nats-io/transport-node'
import { Effect, FiberSet } from 'effect'
import type { BusRequests } from '../protocol/bus.js'
import { BusError, NO_SUBMIT_RESPONDERS } from '../protocol/bus.js'
import type { ControlReply } from '../protocol/messages.js'
import { stderrLog } from '../loop/survive.js'
import { answerControl, answerSubmit, encodeControlReply } from './control-answer.js'
import { controlTarget, type NatsSubjects } from './nats-subjects.js'
import { subscribed, validToken } from './nats-subscription.js'
import { firstLine } from './nats-work-queue.js'
import { bytesToText, decodeControlReply, encodeControlBody } from './wire.js'

const DEFAULT_CONTROL_TIMEOUT_MS = 5_000

const isTimeout = (cause: unknown): boolean => cause instanceof TimeoutError || (cause instanceof RequestError && cause.cause instanceof TimeoutError)

const respond = (msg: Msg, reply: ControlReply): Effect.Effect<void> =>
  Effect.sync(() => {
    try {
      msg.respond(encodeControlReply(reply))
    } catch {
      // The connection closed while answering; the requester times out.
    }
  })

/**
 * The NATS bus's requests: control and submit by request/reply (docs/nats.md). Those served for
 * every run are in the workers' queue group (`queueGroup`): each request goes to one worker.
 */
export const makeNatsRequests = (nc: NatsConnection, subjects: NatsSubjects, queueGroup: string): BusRequests => {
  const serveControl: BusRequests['serveControl'] = (handler, serveOptions) =>
    Effect.gen(function* () {
      const log = serveOptions?.log ?? stderrLog
      // Registered before the subscription, so released after it: no request is taken once
      // the answers in progress are being interrupted.
      const run = yield* FiberSet.makeRuntime<never, void, never>()
      const onRequest = (error: Error | null, msg: Msg): void => {
        if (error !== null) {
          log(`control subscription: ${firstLine(error)}`)
          return
        }
        const { runId, verb } = controlTarget(msg.subject)
        run(answerControl(handler, runId, verb, bytesToText(msg.data), log).pipe(Effect.flatMap((reply) => respond(msg, reply))))
      }
      const own = serveOptions?.runId
      if (own !== undefined) {
        yield* validToken('run id', own)
        yield* subscribed(nc, () => nc.subscribe(subjects.control(own, '*'), { callback: onRequest }))
        return
      }
      // The queue group makes each request go to one worker, not all of them.
      yield* subscribed(nc, () => nc.subscribe(subjects.anyControl, { queue: queueGroup, callback: onRequest }))
    })

  const serveSubmit: BusRequests['serveSubmit'] = (handler, serveOptions) =>
    Effect.gen(function* () {
      const log = serveOptions?.log ?? stderrLog
      const run = yield* FiberSet.makeRuntime<never, void, never>()
      // In the workers' queue group: each submission is taken by one worker.
      yield* subscribed(nc, () =>
        nc.subscribe(subjects.submit, {
          queue: queueGroup,
          callback: (error, msg) => {
            if (error !== null) return log(`submit subscription: ${firstLine(error)}`)
            run(answerSubmit(handler, bytesToText(msg.data), log).pipe(Effect.flatMap((reply) => respond(msg, reply))))
          }
        })
      )
    })

  /**
   * One request/reply of the control API or of submit: the body encoded, the reply decoded, and
   * a failure said in one line (`what` names the request in it; `noResponders` is what nobody
   * serving it says).
   */
  const ask = (subject: string, body: unknown, timeoutMs: number, what: string, noResponders: string): Effect.Effect<ControlReply, BusError> =>
    Effect.gen(function* () {
      const payload = yield* encodeControlBody(body)
      const reply = yield* Effect.tryPromise({
        try: () => nc.request(subject, payload, { timeout: timeoutMs }),
        catch: (cause) =>
          new BusError({
            message:
              cause instanceof RequestError && cause.isNoResponders()
                ? noResponders
                : isTimeout(cause)
                  ? `${what} timed out after ${timeoutMs}ms`
                  : `${what} failed: ${firstLine(cause)}`,
            cause
          })
      })
      return yield* decodeControlReply(bytesToText(reply.data))
    })

  const submit: BusRequests['submit'] = (body, timeoutMs = DEFAULT_CONTROL_TIMEOUT_MS) => ask(subjects.submit, body, timeoutMs, 'submit', NO_SUBMIT_RESPONDERS)

  const control: BusRequests['control'] = (runId, verb, body, timeoutMs = DEFAULT_CONTROL_TIMEOUT_MS) =>
    Effect.gen(function* () {
      yield* validToken('run id', runId)
      yield* validToken('control verb', verb)
      const subject = subjects.control(runId, verb)
      return yield* ask(subject, body, timeoutMs, `control ${verb} of run ${runId}`, `no responders for ${subject}`)
    })

  return { serveControl, serveSubmit, submit, control }
}
