import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream'
import { Effect, Either } from 'effect'
import type { ChildDelivery, ConsumeOptions } from '../protocol/bus.js'
import { serveDelivery } from '../protocol/bus.js'
import { stderrLog } from '../loop/survive.js'
import { bytesToText, decodeChildRequest } from './wire.js'

// How long one pull request waits at the server before the slot asks again (the client's default).
const PULL_EXPIRES_MS = 30_000

// Acks and naks are fire-and-forget publishes; on a closed connection they throw, and then the
// ack deadline decides instead.
const quietly = (f: () => void): Effect.Effect<void> =>
  Effect.sync(() => {
    try {
      f()
    } catch {
      // see above
    }
  })

/**
 * One pull request for one message; `undefined` when it expired empty. Interrupted (the worker's
 * scope closed), it withdraws the request, and hands back a message that raced in.
 */
export const pullOne = (source: Consumer): Effect.Effect<JsMsg | undefined, unknown> =>
  Effect.async<JsMsg | undefined, unknown>((resume) => {
    let cancelled = false
    let messages: ConsumerMessages | undefined
    void (async () => {
      try {
        messages = await source.fetch({ max_messages: 1, expires: PULL_EXPIRES_MS })
        if (cancelled) {
          await messages.close()
          return
        }
        let received: JsMsg | undefined
        for await (const message of messages) {
          if (cancelled || received !== undefined) message.nak()
          else received = message
        }
        if (!cancelled) resume(Effect.succeed(received))
        else received?.nak()
      } catch (error) {
        if (!cancelled) resume(Effect.fail(error))
      }
    })()
    return Effect.sync(() => {
      cancelled = true
      void messages?.close().catch(() => undefined)
    })
  })

/** A pulled message served as every bus serves a delivery (`serveDelivery`), its acks JetStream's. */
export const serveMessage = (
  message: JsMsg,
  ackWaitMs: number,
  handle: (delivery: ChildDelivery) => Effect.Effect<void, unknown>,
  options: ConsumeOptions
): Effect.Effect<void> => {
  const decoded = decodeChildRequest(bytesToText(message.data))
  // Not ours to drive and never will be: drop it for good rather than redeliver it forever,
  // and say why in the log. No reason with the term: servers before 2.10 do not recognise
  // `+TERM <reason>` and would leave the message pending.
  if (Either.isLeft(decoded)) {
    const log = options.log ?? stderrLog
    return Effect.zipRight(
      Effect.sync(() => log(`refused a child-run request: ${decoded.left}`)),
      quietly(() => message.term())
    )
  }
  const request = decoded.right
  const delivery: ChildDelivery = {
    request,
    deliveryCount: message.info.deliveryCount,
    working: quietly(() => message.working()),
    ack: quietly(() => message.ack()),
    nak: quietly(() => message.nak()),
    term: quietly(() => message.term())
  }
  return serveDelivery(delivery, ackWaitMs, handle, options)
}
