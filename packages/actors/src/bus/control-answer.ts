import { Effect } from 'effect'
import { causeLine, type LogLine, stderrLog } from '../loop/survive.js'
import type { ControlHandler, SubmitHandler } from './bus.js'
import type { ControlReply, ControlVerb } from './messages.js'
import { ControlVerb as ControlVerbs, controlError, invalidRunId } from './messages.js'
import { encodeJson } from './wire.js'

const verbs: ReadonlySet<string> = new Set(Object.values(ControlVerbs))

const isControlVerb = (verb: string): verb is ControlVerb => verbs.has(verb)

/**
 * Answers one control request the way every bus does: an invalid run id (docs/nats.md), an
 * unknown verb and a handler that dies are `{ok: false}` replies, never a crash of the serving
 * loop; a handler only ever sees a valid run id and a known verb.
 */
export const answerControl = (handler: ControlHandler, runId: string, verb: string, body: string, log: LogLine = stderrLog): Effect.Effect<ControlReply> => {
  const badId = invalidRunId(runId)
  if (badId !== undefined) return Effect.succeed(controlError(badId))
  return isControlVerb(verb)
    ? Effect.suspend(() => handler(runId, verb, body)).pipe(
        // The requester learns only that it failed; the cause is the operator's, in the log.
        Effect.catchAllCause((cause) =>
          Effect.sync(() => {
            log(`control ${verb} of run ${runId} failed: ${causeLine(cause)}`)
            return controlError('internal error')
          })
        )
      )
    : Effect.succeed(controlError(`unknown control verb "${verb}"`))
}

/** Answers one submit request: a handler that dies is an `{ok: false}` reply and a logged cause. */
export const answerSubmit = (handler: SubmitHandler, body: string, log: LogLine = stderrLog): Effect.Effect<ControlReply> =>
  Effect.suspend(() => handler(body)).pipe(
    Effect.catchAllCause((cause) =>
      Effect.sync(() => {
        log(`a submitted run failed to be taken: ${causeLine(cause)}`)
        return controlError('internal error')
      })
    )
  )

/** The reply as JSON text; a reply JSON cannot hold (a bigint, a cycle) is an internal error. */
export const encodeControlReply = (reply: ControlReply): string => encodeJson(reply) ?? JSON.stringify(controlError('internal error'))
