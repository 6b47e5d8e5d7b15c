import type { RunStreamEvent } from '../protocol/run-stream-event.js'
import { Either } from 'effect'
import { BusError } from '../protocol/bus.js'
import type { ChildRunRequest, ControlReply, RunDoneMessage, RunEventMessage } from '../protocol/messages.js'
import { PROTOCOL_VERSION } from '../protocol/messages.js'

// How payloads look as text (docs/nats.md), shared by both buses so the in-process one hands
// handlers exactly what NATS would. Decoders return `undefined` for anything malformed: whatever
// arrives on a subject, from any client in any language, must never crash a worker.

type JsonObject = Readonly<Record<string, unknown>>

const parseObject = (text: string): JsonObject | undefined => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : undefined
}

const isVersioned = (value: JsonObject): boolean => value['v'] === PROTOCOL_VERSION

/**
 * Decodes an `agentvisor.runs.start` payload's shape, or says in one line why it is none (the
 * worker logs it, docs/nats.md "Who may start a run"). The ids' form (an empty or foreign id
 * included) and the contract are checked by the worker, which logs what it refuses, naming it.
 */
export const decodeChildRequest = (text: string): Either.Either<ChildRunRequest, string> => {
  const value = parseObject(text)
  if (value === undefined) return Either.left('the payload is not a JSON object')
  if (!isVersioned(value)) return Either.left(`v: must be ${PROTOCOL_VERSION}`)
  const { runId, parentId, contract, traceparent } = value
  if (typeof runId !== 'string') return Either.left('runId: must be a string')
  // A null parent is a submitted root run (docs/nats.md); the worker checks its row exists.
  if (typeof parentId !== 'string' && parentId !== null) return Either.left(`run ${oneToken(runId)}: parentId: must be a string or null`)
  if (traceparent !== undefined && typeof traceparent !== 'string') return Either.left(`run ${oneToken(runId)}: traceparent: must be a string`)
  if (typeof contract !== 'object' || contract === null || Array.isArray(contract))
    return Either.left(`run ${oneToken(runId)}: contract: must be a task (a JSON object)`)
  return Either.right(value as unknown as ChildRunRequest)
}

/** An id from the wire as a log may quote it: JSON-quoted and cut when it is not one. */
const oneToken = (id: string): string => (/^[A-Za-z0-9_-]{1,64}$/.test(id) ? id : JSON.stringify(id.slice(0, 80)))

/** Decodes an `agentvisor.runs.<runId>.events` payload. */
export const decodeRunEvent = (text: string): RunEventMessage | undefined => {
  const value = parseObject(text)
  if (value === undefined || !isVersioned(value)) return undefined
  const { runId, seq, from, event, to, at } = value
  const strings = [runId, from, event, to, at].every((field) => typeof field === 'string')
  return strings && typeof seq === 'number' ? (value as unknown as RunEventMessage) : undefined
}

/** Decodes an `agentvisor.runs.<runId>.stream` payload: one of the run's events (docs/streaming.md). */
export const decodeStreamEvent = (text: string): RunStreamEvent | undefined => {
  const value = parseObject(text)
  if (value === undefined || !isVersioned(value)) return undefined
  const { runId, kind, at } = value
  return typeof runId === 'string' && typeof kind === 'string' && typeof at === 'string' ? (value as unknown as RunStreamEvent) : undefined
}

/** Decodes a versioned payload whose `fields` are strings (`started`, `requests`); undefined for anything else. */
export const decodeVersioned =
  <A>(fields: ReadonlyArray<string>) =>
  (text: string): A | undefined => {
    const value = parseObject(text)
    if (value === undefined || !isVersioned(value)) return undefined
    return fields.every((field) => typeof value[field] === 'string') ? (value as unknown as A) : undefined
  }

/** Decodes an `agentvisor.runs.<runId>.done` payload. */
export const decodeRunDone = (text: string): RunDoneMessage | undefined => {
  const value = parseObject(text)
  if (value === undefined || !isVersioned(value)) return undefined
  const { runId, status, steps } = value
  return typeof runId === 'string' && typeof status === 'string' && typeof steps === 'number' ? (value as unknown as RunDoneMessage) : undefined
}

/** Decodes a control reply; one that is not `{v: 1, ok, ...}` is a `BusError` for the caller. */
export const decodeControlReply = (text: string): Either.Either<ControlReply, BusError> => {
  const value = parseObject(text)
  if (value === undefined) return Either.left(new BusError({ message: 'control reply is not a JSON object' }))
  const valid = isVersioned(value) && (value['ok'] === true || (value['ok'] === false && typeof value['error'] === 'string'))
  return valid ? Either.right(value as unknown as ControlReply) : Either.left(new BusError({ message: 'control reply is malformed' }))
}

/**
 * Encodes a control request body: an object gets `v: 1` when it has no `v`, nothing becomes
 * `{v: 1}`, and bytes are sent as they are (a gateway forwarding a foreign client's payload).
 */
export const encodeControlBody = (body: unknown): Either.Either<Uint8Array | string, BusError> => {
  if (body instanceof Uint8Array) return Either.right(body)
  const versioned =
    body === undefined || body === null
      ? { v: PROTOCOL_VERSION }
      : typeof body === 'object' && !Array.isArray(body) && !('v' in body)
        ? { v: PROTOCOL_VERSION, ...body }
        : body
  try {
    return Either.right(JSON.stringify(versioned))
  } catch (cause) {
    return Either.left(new BusError({ message: 'control body cannot be encoded as JSON', cause }))
  }
}

/** Encodes any outgoing payload; a value JSON cannot hold is a defect of the caller, reported as `undefined`. */
export const encodeJson = (value: unknown): string | undefined => {
  try {
    return JSON.stringify(value)
  } catch {
    return undefined
  }
}

/** The text a payload's bytes carry (invalid UTF-8 becomes U+FFFD and then fails to decode). */
export const bytesToText = (bytes: Uint8Array): string => new TextDecoder().decode(bytes)

/**
 * A value as it comes out of the wire: what the in-process bus hands its subscribers, so they see
 * what they would over NATS (no shared references, no `undefined` fields, dates as strings).
 */
export const viaJson = <A>(value: A): A | undefined => {
  const text = encodeJson(value)
  return text === undefined ? undefined : (JSON.parse(text) as A)
}
