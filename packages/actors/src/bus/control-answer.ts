import { StoreError } from '@agentvisor/store'
import { Cause, Effect, Option } from 'effect'
import { causeLine, type LogLine, stderrLog } from '../loop/survive.js'
import type { ControlHandler, SubmitHandler } from '../protocol/bus.js'
import type { ControlReply, ControlVerb } from '../protocol/messages.js'
import { ControlVerb as ControlVerbs, controlError, invalidRunId } from '../protocol/messages.js'
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

/**
 * Why a request failed, as its reply says it when the store failed under it: what could not be
 * done, never the store's own words (SQL, table and constraint names, a connection string); the
 * cause goes to `log`, in one line, for the operator (docs/nats.md, "Supervising runs from other
 * services").
 */
export const storeFailureReason = (what: string, error: StoreError, log: LogLine): string => {
  log(`${what}: ${causeLine(Cause.fail(error))}`)
  return `${what}: the store failed (the cause is in the log of the process that answered)`
}

/**
 * The reply's reason for a request whose handling died: a store failure said as
 * {@link storeFailureReason} says it, anything else `internal error`; the cause is logged.
 */
export const failureReason = (what: string, cause: Cause.Cause<unknown>, log: LogLine): string => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure) && failure.value instanceof StoreError) return storeFailureReason(what, failure.value, log)
  log(`${what} failed: ${causeLine(cause)}`)
  return `${what}: internal error`
}

/** The reply as JSON text; a reply JSON cannot hold (a bigint, a cycle) is an internal error. */
export const encodeControlReply = (reply: ControlReply): string => encodeJson(reply) ?? JSON.stringify(controlError('internal error'))
