import {
  type Attributes,
  type Context,
  context as otelContext,
  isSpanContextValid,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
  type TracerProvider
} from '@opentelemetry/api'
import type { RunObserver } from '../driver/run-observer.js'
import { SpanAttribute, SpanName, TRANSITION_EVENT } from './span-attributes.js'

/** The instrumentation scope of every agentvisor span. */
export const TRACER_NAME = 'agentvisor'

export interface TelemetryOptions {
  /**
   * Where spans go. Default: the globally registered provider (`trace.getTracer`), a no-op until
   * one is registered. Pass your provider when your OpenTelemetry SDK registers its global
   * through another copy of `@opentelemetry/api` than agentvisor's (docs/telemetry.md).
   */
  readonly tracerProvider?: TracerProvider
}

/** Run statuses that mark the run span as an error: the run ended without reaching its goal. */
const ERROR_STATUSES: ReadonlySet<string> = new Set(['failed', 'timed_out', 'step_cap'])

/**
 * A span and the context it was started in. The context holding the span itself (its children's
 * parent) is derived when a child is started, not kept: an OpenTelemetry context is a Map and
 * three closures, and an idle run would keep two of them for nothing.
 */
interface OpenSpan {
  readonly span: Span
  readonly parent: Context
}

/** The context whose active span is `open`'s: where its children start. */
const contextOf = (open: OpenSpan): Context => trace.setSpan(open.parent, open.span)

interface StepSpan extends OpenSpan {
  readonly number: number
}

/** What one drive of one run has open. */
interface Drive extends OpenSpan {
  step: StepSpan | undefined
  attempt: { readonly step: number; readonly index: number; readonly span: Span } | undefined
  tool: Span | undefined
}

// W3C Trace Context, version 00 (https://www.w3.org/TR/trace-context/#traceparent-header).
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** The context of a span in another process, from its `traceparent`; undefined when it is not a valid one. */
export const remoteContext = (traceparent: string | undefined): Context | undefined => {
  const match = traceparent === undefined ? null : TRACEPARENT.exec(traceparent)
  if (match === null) return undefined
  const spanContext: SpanContext = { traceId: match[1]!, spanId: match[2]!, traceFlags: parseInt(match[3]!, 16), isRemote: true }
  return isSpanContextValid(spanContext) ? trace.setSpanContext(ROOT_CONTEXT, spanContext) : undefined
}

/** A span's `traceparent`; undefined for a span that is not recorded anywhere (the no-op tracer's). */
export const formatTraceparent = (spanContext: SpanContext): string | undefined =>
  isSpanContextValid(spanContext)
    ? `00-${spanContext.traceId}-${spanContext.spanId}-${(spanContext.traceFlags & 0xff).toString(16).padStart(2, '0')}`
    : undefined

/** Sets only the attributes that have a value. */
const defined = (attributes: Record<string, string | number | boolean | undefined>): Attributes => {
  const out: Attributes = {}
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) out[key] = value
  return out
}

/**
 * A `RunObserver` that turns a run's hooks into OpenTelemetry spans: `agentvisor.run` per drive,
 * `agentvisor.step` under it per step, `agentvisor.attempt` (one per receipt row) and
 * `agentvisor.tool` (one per performed tool call) under their step. It records ids, names,
 * counts and kinds, never a prompt, an answer, a tool's output, a file's content, an error
 * message or a credential. Without a registered tracer provider every call is a no-op.
 *
 * @example
 * const av = await Agentvisor.open({ db: 'av.db', observers: [telemetryObserver()] })
 */
export const telemetryObserver = (options: TelemetryOptions = {}): RunObserver => {
  const tracer = (): Tracer => (options.tracerProvider ?? trace.getTracerProvider()).getTracer(TRACER_NAME)
  const drives = new Map<string, Drive>()

  const endTool = (drive: Drive): void => {
    drive.tool?.end()
    drive.tool = undefined
  }
  const endAttempt = (drive: Drive): void => {
    drive.attempt?.span.end()
    drive.attempt = undefined
  }
  const endStep = (drive: Drive): void => {
    endTool(drive)
    endAttempt(drive)
    drive.step?.span.end()
    drive.step = undefined
  }

  /** The span of `step`, opened on the first hook that names it (a resumed drive may start mid-step). */
  const stepOf = (drive: Drive, runId: string, step: number): StepSpan => {
    if (drive.step?.number === step) return drive.step
    endStep(drive)
    const parent = contextOf(drive)
    const span = tracer().startSpan(SpanName.step, { attributes: { [SpanAttribute.runId]: runId, [SpanAttribute.step]: step } }, parent)
    drive.step = { number: step, span, parent }
    return drive.step
  }

  const endDrive = (runId: string, drive: Drive): void => {
    endStep(drive)
    drive.span.end()
    drives.delete(runId)
  }

  return {
    onDriveStarted: (info) => {
      const previous = drives.get(info.runId)
      if (previous !== undefined) endDrive(info.runId, previous)
      // A child driven by this process nests under its parent's step; one handed over by another
      // process (a parent on another worker, a submitter) under the span it was handed over
      // under; anything else is a root.
      const parent = info.parentId === undefined ? undefined : drives.get(info.parentId)
      const remote = parent === undefined ? remoteContext(info.traceparent) : undefined
      const parentContext = parent !== undefined ? contextOf(parent.step ?? parent) : (remote ?? otelContext.active())
      const span = tracer().startSpan(
        SpanName.run,
        {
          attributes: defined({
            [SpanAttribute.runId]: info.runId,
            [SpanAttribute.parentId]: info.parentId,
            [SpanAttribute.rootId]: info.rootId,
            [SpanAttribute.resumed]: info.resumed,
            [SpanAttribute.startState]: info.state
          })
        },
        parentContext
      )
      drives.set(info.runId, { span, parent: parentContext, step: undefined, attempt: undefined, tool: undefined })
    },

    onDispatch: (info) => {
      const drive = drives.get(info.runId)
      if (drive === undefined) return
      const step = stepOf(drive, info.runId, info.step)
      endAttempt(drive)
      const span = tracer().startSpan(
        SpanName.attempt,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            [SpanAttribute.runId]: info.runId,
            [SpanAttribute.step]: info.step,
            [SpanAttribute.attempt]: info.attempt,
            [SpanAttribute.provider]: info.provider,
            [SpanAttribute.reason]: info.reason,
            [SpanAttribute.operation]: 'chat'
          }
        },
        contextOf(step)
      )
      drive.attempt = { step: info.step, index: info.attempt, span }
    },

    onAttemptSettled: (info) => {
      const drive = drives.get(info.runId)
      if (drive === undefined) return
      const step = stepOf(drive, info.runId, info.step)
      const open = drive.attempt
      // A skipped circuit makes no call, so no `onDispatch` opened its span: it is opened here.
      const span =
        open !== undefined && open.step === info.step && open.index === info.attempt
          ? open.span
          : tracer().startSpan(SpanName.attempt, { kind: SpanKind.CLIENT, attributes: { [SpanAttribute.operation]: 'chat' } }, contextOf(step))
      if (span !== open?.span) endAttempt(drive)
      span.setAttributes(
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
      )
      if (info.outcome === 'failed' || info.outcome === 'unknown') {
        // The kind and status only: a provider's message may quote the request or the key's prefix.
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: info.httpStatus === undefined ? `${info.errorKind ?? 'error'}` : `${info.errorKind ?? 'error'} (HTTP ${info.httpStatus})`
        })
      }
      span.end()
      if (span === open?.span) drive.attempt = undefined
    },

    onToolCall: (info) => {
      const drive = drives.get(info.runId)
      if (drive === undefined) return
      const step = stepOf(drive, info.runId, info.step)
      endTool(drive)
      drive.tool = tracer().startSpan(
        SpanName.tool,
        {
          attributes: defined({
            [SpanAttribute.runId]: info.runId,
            [SpanAttribute.step]: info.step,
            [SpanAttribute.toolName]: info.name,
            [SpanAttribute.toolTarget]: info.target === '' ? undefined : info.target,
            [SpanAttribute.toolSource]: info.source,
            [SpanAttribute.toolEffect]: info.effect
          })
        },
        contextOf(step)
      )
    },

    onToolResult: (info) => {
      const drive = drives.get(info.runId)
      const span = drive?.tool
      if (drive === undefined || span === undefined) return
      // `info.output` is what the model reads (file contents, command output): never recorded.
      span.setAttribute(SpanAttribute.toolOk, info.ok)
      if (!info.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: 'the tool call did not succeed' })
      endTool(drive)
    },

    onTransition: (t) => {
      const drive = drives.get(t.runId)
      if (drive === undefined) return
      drive.span.addEvent(TRANSITION_EVENT, {
        [SpanAttribute.transitionSeq]: t.seq,
        [SpanAttribute.transitionFrom]: t.from,
        [SpanAttribute.transitionEvent]: t.event,
        [SpanAttribute.transitionTo]: t.to
      })
      // Verification closes a step (the next one, if any, starts with its dispatch); so does the end.
      if (t.event === 'VERIFY_PASSED' || t.event === 'VERIFY_FAILED' || t.to.startsWith('finished')) endStep(drive)
    },

    onFinished: (result) => {
      const drive = drives.get(result.runId)
      if (drive === undefined) return
      const error = result.error
      drive.span.setAttributes(
        defined({
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
      )
      if (ERROR_STATUSES.has(result.status))
        drive.span.setStatus({ code: SpanStatusCode.ERROR, message: `${result.status}${error === undefined ? '' : `: ${error.kind}`}` })
      endDrive(result.runId, drive)
    },

    traceparent: (runId) => {
      const drive = drives.get(runId)
      return drive === undefined ? undefined : formatTraceparent((drive.step ?? drive).span.spanContext())
    },

    onDriveEnded: ({ runId }) => {
      const drive = drives.get(runId)
      if (drive === undefined) return
      // No `onFinished`: the runtime closed under the run, which stays resumable.
      drive.span.setAttributes({ [SpanAttribute.status]: 'running', [SpanAttribute.interrupted]: true })
      endDrive(runId, drive)
    }
  }
}
