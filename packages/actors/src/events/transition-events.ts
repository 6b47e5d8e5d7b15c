import { type ApprovalRow, type AttemptRow, isFinalStatus, type RunListRow, type RunRow, type StepRow, type TransitionRow } from '@agentvisor/store'
import { pendingRequestOf } from '../approval/pending-request.js'
import { storedOutput } from '../driver/conversation.js'
import { noProgressWarning } from '../driver/stall.js'
import { statusOfState } from '../machine/run-state.js'
import type { RunStreamEvent } from '../protocol/run-stream-event.js'
import { type EventCursor, textKey } from './event-cursor.js'

// What each transition of a run yields on its event stream (docs/streaming.md), read back from
// the store's rows by run-events.ts `readEvents`, in the order a live run publishes them.

/** The events that answer a dispatch: each settles the step's next receipt. */
const ANSWERS: ReadonlySet<string> = new Set(['PROVIDER_OK', 'PROVIDER_ERROR', 'CIRCUIT_OPEN', 'DISPATCH_LOST'])
/** The events that end a dispatch without an answer: its receipt settles `cancelled` (or `unknown`). */
const INTERRUPTIONS: ReadonlySet<string> = new Set(['CANCEL', 'TIMEOUT', 'FAIL'])

/** The rows of the steps from the cursor's on, read once for all the transitions of a reading. */
export interface EventRows {
  readonly attempts: ReadonlyArray<AttemptRow>
  readonly steps: ReadonlyArray<StepRow>
  readonly approvals: ReadonlyArray<ApprovalRow>
  readonly children: ReadonlyArray<RunListRow>
}

/** One transition being read: the cursor it moves, the rows, and where its events go. */
export interface TransitionRead {
  readonly cursor: EventCursor
  readonly t: TransitionRow
  readonly rows: EventRows
  readonly push: (event: RunStreamEvent) => void
}

const attemptOf = (rows: EventRows, step: number, n: number): AttemptRow | undefined => rows.attempts.find((a) => a.step === step && a.attempt === n)
const stepOf = (rows: EventRows, step: number): StepRow | undefined => rows.steps.find((s) => s.step === step)

/** The transition ends a dispatch: answered, or interrupted. */
export const isAnswer = (t: TransitionRow): boolean => t.from_state === 'dispatching' && (ANSWERS.has(t.event) || INTERRUPTIONS.has(t.event))

/** An answer's text, whole, unless this reader heard its streamed pieces (docs/streaming.md, "Text"). */
export const answerText = ({ cursor, t, rows, push }: TransitionRead): void => {
  const heard = cursor.heardText.delete(textKey(cursor.step, cursor.attempt))
  if (t.event !== 'PROVIDER_OK' || heard) return
  const step = stepOf(rows, cursor.step)
  if (step !== undefined && step.text !== '')
    push({ kind: 'text', runId: cursor.runId, at: step.at, step: cursor.step, attempt: cursor.attempt, delta: step.text })
}

/** An answer's receipt, and with a model's answer its tool calls and the usage so far. */
export const answerEvents = ({ cursor, t, rows, push }: TransitionRead): void => {
  const { runId } = cursor
  const { seq, at } = t
  const row = attemptOf(rows, cursor.step, cursor.attempt)
  if (row !== undefined && row.outcome !== 'pending') push(attemptEvent(runId, seq, row))
  if (ANSWERS.has(t.event)) cursor.attempt++
  if (t.event !== 'PROVIDER_OK') return
  cursor.completedSteps++
  if (row !== undefined) cursor.tally.add(cursor.prices.get(row.provider), row.tokens_in ?? 0, row.tokens_out ?? 0)
  for (const call of stepOf(rows, cursor.step)?.tool_calls ?? []) {
    push({ kind: 'toolCall', runId, seq, at, step: cursor.step, callId: call.id, name: call.name, arguments: parsed(call.arguments) })
  }
  push({ kind: 'usage', runId, seq, at, usage: cursor.tally.usage })
}

const toolResults = ({ cursor, t, rows, push }: TransitionRead): void => {
  const step = stepOf(rows, cursor.step)
  for (const result of step?.results ?? []) {
    const name = step?.tool_calls.find((call) => call.id === result.toolCallId)?.name ?? ''
    push({ kind: 'toolResult', runId: cursor.runId, seq: t.seq, at: t.at, step: cursor.step, callId: result.toolCallId, name, output: result.output })
    if (result.stall !== undefined) push(stallWarned(cursor.runId, t.seq, t.at, cursor.step, result.stall, result.stall === 'repeat' ? name : undefined))
  }
}

/** The step's requests of one kind (approvals, or questions), each told once. */
const requestsOf =
  (questions: boolean) =>
  ({ cursor, t, rows, push }: TransitionRead): void => {
    for (const row of rows.approvals) {
      if (row.step !== cursor.step || cursor.approvals.has(row.id) || (row.kind === 'input') !== questions) continue
      cursor.approvals.add(row.id)
      push({ kind: questions ? 'inputRequested' : 'approvalRequested', runId: cursor.runId, seq: t.seq, at: t.at, request: pendingRequestOf(row) })
    }
  }

const childrenStarted = ({ cursor, t, rows, push }: TransitionRead): void => {
  for (const child of rows.children) {
    if (cursor.childrenStarted.has(child.id)) continue
    cursor.childrenStarted.add(child.id)
    push({ kind: 'child', runId: cursor.runId, seq: t.seq, at: t.at, childId: child.id, goal: child.goal, status: 'running' })
  }
}

const childrenEnded = ({ cursor, t, rows, push }: TransitionRead): void => {
  for (const child of rows.children) {
    if (!cursor.childrenStarted.has(child.id) || cursor.childrenEnded.has(child.id) || !isFinalStatus(child.status)) continue
    cursor.childrenEnded.add(child.id)
    push({ kind: 'child', runId: cursor.runId, seq: t.seq, at: t.at, childId: child.id, goal: child.goal, status: child.status })
  }
}

// A new turn of a finished run: its first step follows the steps answered so far.
const followUp = ({ cursor }: TransitionRead): void => {
  cursor.step = cursor.completedSteps + 1
  cursor.attempt = 0
  cursor.ended = false
}

const verifyFailed = ({ cursor, t, rows, push }: TransitionRead): void => {
  if (cursor.stall !== undefined && stepOf(rows, cursor.step)?.feedback?.endsWith(noProgressWarning(cursor.stall))) {
    push(stallWarned(cursor.runId, t.seq, t.at, cursor.step, 'noProgress', undefined))
  }
  if (t.to_state === 'dispatching') {
    cursor.step++
    cursor.attempt = 0
  }
}

/** The events a transition yields by its event, besides its own and its answer's; none for the others. */
export const EVENT_READERS: ReadonlyMap<string, (read: TransitionRead) => void> = new Map([
  ['TOOLS_DONE', toolResults],
  ['APPROVAL_REQUESTED', requestsOf(false)],
  ['INPUT_REQUESTED', requestsOf(true)],
  ['CHILDREN_SPAWNED', childrenStarted],
  ['CHILDREN_DONE', childrenEnded],
  ['FOLLOW_UP', followUp],
  ['VERIFY_FAILED', verifyFailed]
])

/** A transition into a final state: the stall that ended the run, if one did, and its `done`. */
export const endEvents = ({ cursor, t, rows }: TransitionRead, run: RunRow | undefined): RunStreamEvent[] => {
  const { runId } = cursor
  const status = statusOfState(t.to_state)
  // The turn's own last answer: a later turn's steps may already be in the rows read.
  const output = status === 'succeeded' ? storedOutput(rows.steps.filter((s) => s.step <= cursor.completedSteps)) : undefined
  return [
    ...(run?.error?.kind === 'stalled'
      ? [{ kind: 'stall', runId, seq: t.seq, at: t.at, step: cursor.step, phase: 'stalled', message: run.error.message } satisfies RunStreamEvent]
      : []),
    {
      kind: 'done',
      runId,
      seq: t.seq,
      at: t.at,
      status,
      steps: cursor.completedSteps,
      ...(output !== undefined ? { output } : {}),
      usage: cursor.tally.usage,
      ...(run?.error != null ? { error: run.error } : {})
    }
  ]
}

const stallWarned = (runId: string, seq: number, at: string, step: number, rule: 'repeat' | 'noProgress', name: string | undefined): RunStreamEvent => ({
  kind: 'stall',
  runId,
  seq,
  at,
  step,
  phase: 'warned',
  rule,
  ...(name !== undefined ? { name } : {}),
  message:
    rule === 'repeat'
      ? `${name ?? 'a call'}: the same call reached limits.stall.repeats; one more ends the run`
      : 'limits.stall.window steps without progress; one more ends the run'
})

const attemptEvent = (runId: string, seq: number, row: AttemptRow): RunStreamEvent => ({
  kind: 'attempt',
  runId,
  seq,
  at: row.settled_at ?? row.started_at,
  step: row.step,
  attempt: row.attempt,
  provider: row.provider,
  reason: row.reason,
  outcome: row.outcome,
  ...(row.error_kind !== null ? { errorKind: row.error_kind } : {}),
  ...(row.http_status !== null ? { httpStatus: row.http_status } : {}),
  ...(row.latency_ms !== null ? { latencyMs: row.latency_ms } : {}),
  ...(row.tokens_in !== null ? { tokensIn: row.tokens_in } : {}),
  ...(row.tokens_out !== null ? { tokensOut: row.tokens_out } : {})
})

/** Tool-call arguments as JSON when they parse, else the raw text the model sent. */
const parsed = (raw: string): unknown => {
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}
