import { type Attributes, type SpanStatus, SpanStatusCode } from '@opentelemetry/api'
import type { AttemptSettled, DriveStarted, RunObserver, TransitionRecord } from '../driver/run-observer.js'
import { SpanAttribute } from './span-attributes.js'

// What each span records, from the hook that opens or settles it (telemetry-observer.ts): ids,
// names, counts and kinds, never a goal, a prompt, an answer, a tool's output, a file's content,
// an error message or a credential (docs/telemetry.md). One place to read all of it.

type Hook<K extends keyof RunObserver> = Parameters<NonNullable<RunObserver[K]>>[0]

/** Run statuses that mark the run span as an error: the run ended without reaching its goal. */
const ERROR_STATUSES: ReadonlySet<string> = new Set(['failed', 'timed_out', 'step_cap'])

/** Sets only the attributes that have a value. */
const defined = (attributes: Record<string, string | number | boolean | undefined>): Attributes => {
  const out: Attributes = {}
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) out[key] = value
  return out
}

/** The run span, as a drive starts. */
export const driveAttributes = (info: DriveStarted): Attributes =>
  defined({
    [SpanAttribute.runId]: info.runId,
    [SpanAttribute.parentId]: info.parentId,
    [SpanAttribute.rootId]: info.rootId,
    [SpanAttribute.resumed]: info.resumed,
    [SpanAttribute.startState]: info.state
  })

/** An attempt's span, as its call goes out. */
export const dispatchAttributes = (info: Hook<'onDispatch'>): Attributes => ({
  [SpanAttribute.runId]: info.runId,
  [SpanAttribute.step]: info.step,
  [SpanAttribute.attempt]: info.attempt,
  [SpanAttribute.provider]: info.provider,
  [SpanAttribute.reason]: info.reason,
  [SpanAttribute.operation]: 'chat'
})

/** An attempt's span once its receipt is settled. */
export const settledAttributes = (info: AttemptSettled): Attributes =>
  defined({
    [SpanAttribute.runId]: info.runId,
    [SpanAttribute.step]: info.step,
    [SpanAttribute.attempt]: info.attempt,
    [SpanAttribute.provider]: info.provider,
    [SpanAttribute.providerKind]: info.providerKind,
    [SpanAttribute.model]: info.model,
    [SpanAttribute.reason]: info.reason,
    [SpanAttribute.outcome]: info.outcome,
    [SpanAttribute.errorKind]: info.errorKind,
    [SpanAttribute.httpStatus]: info.httpStatus,
    [SpanAttribute.latencyMs]: info.latencyMs,
    [SpanAttribute.ttftMs]: info.ttftMs,
    [SpanAttribute.tokensIn]: info.tokensIn,
    [SpanAttribute.tokensOut]: info.tokensOut
  })

/** A failed attempt's status: the kind and HTTP status only, as a provider's message may quote the request or the key's prefix. */
export const settledStatus = (info: AttemptSettled): SpanStatus | undefined =>
  info.outcome === 'failed' || info.outcome === 'unknown'
    ? {
        code: SpanStatusCode.ERROR,
        message: info.httpStatus === undefined ? `${info.errorKind ?? 'error'}` : `${info.errorKind ?? 'error'} (HTTP ${info.httpStatus})`
      }
    : undefined

/** A tool call's span: its name, source, effect class and (a built-in's) path or command; never its arguments otherwise. */
export const toolAttributes = (info: Hook<'onToolCall'>): Attributes =>
  defined({
    [SpanAttribute.runId]: info.runId,
    [SpanAttribute.step]: info.step,
    [SpanAttribute.toolName]: info.name,
    [SpanAttribute.toolTarget]: info.target === '' ? undefined : info.target,
    [SpanAttribute.toolSource]: info.source,
    [SpanAttribute.toolEffect]: info.effect
  })

/** The run span's event of one persisted transition. */
export const transitionAttributes = (t: TransitionRecord): Attributes => ({
  [SpanAttribute.transitionSeq]: t.seq,
  [SpanAttribute.transitionFrom]: t.from,
  [SpanAttribute.transitionEvent]: t.event,
  [SpanAttribute.transitionTo]: t.to
})

/** The run span as the run ends: its status, steps, error kind and usage. */
export const finishedAttributes = (result: Hook<'onFinished'>): Attributes => {
  const error = result.error
  return defined({
    [SpanAttribute.status]: result.status,
    [SpanAttribute.steps]: result.steps,
    [SpanAttribute.errorKind]: error?.kind,
    [SpanAttribute.errorProvider]: error?.provider,
    [SpanAttribute.errorHttpStatus]: error?.httpStatus,
    [SpanAttribute.runTokensIn]: result.usage?.inputTokens,
    [SpanAttribute.runTokensOut]: result.usage?.outputTokens,
    [SpanAttribute.runCostUsd]: result.usage?.costUsd,
    [SpanAttribute.treeTokensIn]: result.treeUsage?.inputTokens,
    [SpanAttribute.treeTokensOut]: result.treeUsage?.outputTokens,
    [SpanAttribute.treeCostUsd]: result.treeUsage?.costUsd
  })
}

/** A run that ended without reaching its goal: its status and error kind. */
export const finishedStatus = (result: Hook<'onFinished'>): SpanStatus | undefined =>
  ERROR_STATUSES.has(result.status)
    ? { code: SpanStatusCode.ERROR, message: `${result.status}${result.error === undefined ? '' : `: ${result.error.kind}`}` }
    : undefined
