import type { RunError, TaskContract } from '@agentvisor/core'
import { Either, ParseResult, Schema } from 'effect'

/** Every payload on the bus carries the protocol version (CONTRACT.md §5). */
export const PROTOCOL_VERSION = 1 as const

/** `agentvisor.runs.start`: a child run for any worker to drive. */
export interface ChildRunRequest {
  readonly v: typeof PROTOCOL_VERSION
  readonly runId: string
  readonly parentId: string
  readonly contract: TaskContract
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

/** `agentvisor.runs.<runId>.done`: how a run ended (or paused). */
export interface RunDoneMessage {
  readonly v: typeof PROTOCOL_VERSION
  readonly runId: string
  readonly status: string
  readonly steps: number
  readonly result?: string | undefined
  readonly error?: RunError | undefined
}

export const ControlVerb = { cancel: 'cancel', approve: 'approve', status: 'status' } as const
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

/** `cancel` and `status` take an empty body (besides the version). */
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
export const parseControlBody = (verb: ControlVerb, text: string): Either.Either<ApproveBody | typeof EmptyBody.Type, string> => {
  let raw: unknown
  try {
    raw = text.trim() === '' ? {} : JSON.parse(text)
  } catch {
    return Either.left('payload is not JSON')
  }
  const schema = verb === 'approve' ? ApproveBody : EmptyBody
  return Either.mapLeft(Schema.decodeUnknownEither(schema as Schema.Schema<ApproveBody | typeof EmptyBody.Type>, { errors: 'first' })(raw), (error) => {
    const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
    if (issue === undefined) return 'payload is malformed'
    const field = issue.path.map(String).join('.')
    return `${field === '' ? 'payload' : field}: ${issue.message.split('\n')[0]}`
  })
}

/** The subjects of CONTRACT.md §5. */
export const Subjects = {
  start: 'agentvisor.runs.start',
  events: (runId: string) => `agentvisor.runs.${runId}.events`,
  done: (runId: string) => `agentvisor.runs.${runId}.done`,
  control: (runId: string, verb: ControlVerb) => `agentvisor.control.${runId}.${verb}`,
  /** Every run's control subjects, for a worker's subscription. */
  anyControl: 'agentvisor.control.*.*'
} as const
