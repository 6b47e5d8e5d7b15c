import type { RunError, Usage, TaskContract } from '@agentvisor/core'
import type { PendingRequest } from '../approval/pending-request.js'
import { Either, ParseResult, Schema } from 'effect'

/** Every payload on the bus carries the protocol version (docs/nats.md). */
export const PROTOCOL_VERSION = 1 as const

/**
 * `agentvisor.runs.start`: a run for any worker to drive: a child (`parentId` its parent), or a
 * root run submitted on `agentvisor.runs.submit` (`parentId` null; its row is in the store
 * already, docs/nats.md).
 */
export interface ChildRunRequest {
  readonly v: typeof PROTOCOL_VERSION
  readonly runId: string
  readonly parentId: string | null
  readonly contract: TaskContract
  /**
   * The W3C trace context of the span the run was handed over under (the parent's step, or the
   * submitter's span): the run's spans join that trace (docs/telemetry.md).
   */
  readonly traceparent?: string | undefined
}

/** `agentvisor.runs.<runId>.events`: one message per persisted transition. */
export interface RunEventMessage {
  readonly v: typeof PROTOCOL_VERSION
  readonly runId: string
  readonly seq: number
  readonly from: string
  readonly event: string
  readonly to: string
  readonly at: string
}

/** `agentvisor.runs.<runId>.started`: a driver took the run, new or resumed (docs/nats.md). */
export interface RunStartedMessage {
  readonly v: typeof PROTOCOL_VERSION
  readonly runId: string
  readonly parentId: string | null
  readonly rootId: string
  readonly goal: string
  /** The agent the run runs (a delegate's name); null for the task's own. */
  readonly agent: string | null
  readonly resumed: boolean
}

/** `agentvisor.requests`: a run anywhere paused on a request (an approval, a question, a recovery decision). */
export interface RunRequestMessage {
  readonly v: typeof PROTOCOL_VERSION
  readonly runId: string
  readonly rootId: string
  readonly request: PendingRequest
}

/** `agentvisor.runs.<runId>.done`: how a run ended (or paused). */
export interface RunDoneMessage {
  readonly v: typeof PROTOCOL_VERSION
  readonly runId: string
  readonly status: string
  readonly steps: number
  readonly result?: string | undefined
  /** What a succeeded run produced (docs/agents.md, "Structured results"). */
  readonly output?: unknown
  /** What the run's own calls cost, and its tree's when it started children (docs/task-file.md, "Usage and budgets"). */
  readonly usage?: Usage | undefined
  readonly treeUsage?: Usage | undefined
  readonly error?: RunError | undefined
}

/**
 * What a run id from a bus may look like (docs/nats.md): letters, digits, `_` and `-`, 1 to 64
 * of them. The ids agentvisor makes are UUIDs; anything else that arrives on the start queue or
 * in a control subject (a path, a wildcard, a dot, a newline, a megabyte) is refused before it
 * touches the store, a subject or a log line.
 */
export const RUN_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/

/** Why `id` cannot be a run id from a bus (one line, the id quoted and cut short), or `undefined`. */
export const invalidRunId = (id: unknown, what = 'run id'): string | undefined => {
  if (typeof id === 'string' && RUN_ID_PATTERN.test(id)) return undefined
  const shown = typeof id === 'string' ? JSON.stringify(id.length > 70 ? `${id.slice(0, 64)}...` : id) : String(id)
  return `${what} ${shown} is not valid: expected 1 to 64 letters, digits, "_" or "-"`
}

export const ControlVerb = { cancel: 'cancel', approve: 'approve', status: 'status', answer: 'answer', pending: 'pending', tree: 'tree' } as const
export type ControlVerb = (typeof ControlVerb)[keyof typeof ControlVerb]

/** `agentvisor.control.<runId>.approve` request body. */
export const ApproveBody = Schema.Struct({
  v: Schema.Literal(PROTOCOL_VERSION),
  requestId: Schema.optional(Schema.String),
  decision: Schema.Literal('approve', 'deny'),
  remember: Schema.optional(Schema.Boolean),
  edit: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type ApproveBody = typeof ApproveBody.Type

/** `agentvisor.control.<runId>.answer` request body: the answer to a question (`ask_human`). */
export const AnswerBody = Schema.Struct({
  v: Schema.Literal(PROTOCOL_VERSION),
  requestId: Schema.optional(Schema.String),
  text: Schema.String.pipe(Schema.filter((text) => text.trim() !== '' || 'must not be empty'))
})
export type AnswerBody = typeof AnswerBody.Type

/** `agentvisor.runs.submit` request body: a root run for the workers (docs/nats.md, "Submitting runs"). */
export const SubmitBody = Schema.Struct({
  v: Schema.Literal(PROTOCOL_VERSION),
  /** A task file's content, laid over the worker's submit template. */
  contract: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  runId: Schema.optional(Schema.String.pipe(Schema.filter((id) => invalidRunId(id) ?? true))),
  traceparent: Schema.optional(Schema.String)
})
export type SubmitBody = typeof SubmitBody.Type

/** `cancel`, `status` and `pending` take an empty body (besides the version). */
export const EmptyBody = Schema.Struct({ v: Schema.Literal(PROTOCOL_VERSION) })

/** What every control request is answered with: `{v, ok: true, ...}` or `{v, ok: false, error}`. */
export type ControlReply =
  | ({ readonly v: typeof PROTOCOL_VERSION; readonly ok: true } & Readonly<Record<string, unknown>>)
  | { readonly v: typeof PROTOCOL_VERSION; readonly ok: false; readonly error: string }

export const controlError = (error: string): ControlReply => ({ v: PROTOCOL_VERSION, ok: false, error })

/**
 * Parses a control request's raw bytes (as text) for a verb; a malformed payload is a one-line
 * reason, never an exception: whatever arrives on a subject must not crash a worker.
 */
export const parseControlBody = (verb: ControlVerb, text: string): Either.Either<ApproveBody | AnswerBody | typeof EmptyBody.Type, string> =>
  parseBody(
    (verb === 'approve' ? ApproveBody : verb === 'answer' ? AnswerBody : EmptyBody) as Schema.Schema<ApproveBody | AnswerBody | typeof EmptyBody.Type, unknown>,
    text
  )

/** Parses an `agentvisor.runs.submit` request's text; Left: a one-line reason naming the field. */
export const parseSubmitBody = (text: string): Either.Either<SubmitBody, string> => parseBody(SubmitBody as Schema.Schema<SubmitBody, unknown>, text)

const parseBody = <A>(schema: Schema.Schema<A, unknown>, text: string): Either.Either<A, string> => {
  let raw: unknown
  try {
    raw = text.trim() === '' ? {} : JSON.parse(text)
  } catch {
    return Either.left('payload is not JSON')
  }
  // Unknown fields are refused, as in task files (docs/task-file.md): a misspelt `remeber` must
  // not pass as a plain approval.
  const decode = Schema.decodeUnknownEither(schema, { errors: 'first', onExcessProperty: 'error' })
  return Either.mapLeft(decode(raw), (error) => {
    const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
    if (issue === undefined) return 'payload is malformed'
    const field = issue.path.map(String).join('.')
    const detail = issue._tag === 'Unexpected' ? 'is not a known field' : issue.message.split('\n')[0]
    return `${field === '' ? 'payload' : field}: ${detail}`
  })
}

/** The subjects of docs/nats.md. */
export const Subjects = {
  start: 'agentvisor.runs.start',
  submit: 'agentvisor.runs.submit',
  events: (runId: string) => `agentvisor.runs.${runId}.events`,
  done: (runId: string) => `agentvisor.runs.${runId}.done`,
  stream: (runId: string) => `agentvisor.runs.${runId}.stream`,
  started: (runId: string) => `agentvisor.runs.${runId}.started`,
  requests: 'agentvisor.requests',
  control: (runId: string, verb: ControlVerb) => `agentvisor.control.${runId}.${verb}`,
  /** Every run's control subjects, for a worker's subscription. */
  anyControl: 'agentvisor.control.*.*'
} as const
