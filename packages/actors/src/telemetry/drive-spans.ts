import { type Attributes, type Context, context as otelContext, type Span, type SpanOptions, trace, type Tracer } from '@opentelemetry/api'
import { SpanAttribute, SpanName } from './span-attributes.js'
import { formatTraceparent, remoteContext } from './traceparent.js'

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

export interface StepSpan extends OpenSpan {
  readonly number: number
}

/** What one drive of one run has open: its run span, and under it at most one step, attempt and tool. */
export interface Drive extends OpenSpan {
  step: StepSpan | undefined
  attempt: { readonly step: number; readonly index: number; readonly span: Span } | undefined
  tool: Span | undefined
}

/** The spans each drive of this process has open, by run id (telemetry-observer.ts turns hooks into them). */
export interface DriveSpans {
  /**
   * Opens a drive's run span (ending one the run left open). A child driven by this process nests
   * under its parent's step; one handed over by another process (a parent on another worker, a
   * submitter) under the span of its `traceparent`; anything else is a root.
   */
  readonly open: (runId: string, parentId: string | undefined, traceparent: string | undefined, attributes: Attributes) => void
  readonly get: (runId: string) => Drive | undefined
  /** The span of `step`, opened on the first hook that names it (a resumed drive may start mid-step). */
  readonly stepOf: (drive: Drive, runId: string, step: number) => StepSpan
  /** Starts a span under the step's. */
  readonly underStep: (step: StepSpan, name: SpanName, options: SpanOptions) => Span
  readonly endTool: (drive: Drive) => void
  readonly endAttempt: (drive: Drive) => void
  /** Ends the step's span, and its tool's and attempt's. */
  readonly endStep: (drive: Drive) => void
  /** Ends everything the drive has open, its run span last, and forgets it. */
  readonly end: (runId: string, drive: Drive) => void
  /** The W3C trace context of the run's current span (its step's, else its run's). */
  readonly traceparent: (runId: string) => string | undefined
}

export const makeDriveSpans = (tracer: () => Tracer): DriveSpans => {
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
  const end = (runId: string, drive: Drive): void => {
    endStep(drive)
    drive.span.end()
    drives.delete(runId)
  }

  return {
    open: (runId, parentId, traceparent, attributes) => {
      const previous = drives.get(runId)
      if (previous !== undefined) end(runId, previous)
      const parent = parentId === undefined ? undefined : drives.get(parentId)
      const remote = parent === undefined ? remoteContext(traceparent) : undefined
      const parentContext = parent !== undefined ? contextOf(parent.step ?? parent) : (remote ?? otelContext.active())
      const span = tracer().startSpan(SpanName.run, { attributes }, parentContext)
      drives.set(runId, { span, parent: parentContext, step: undefined, attempt: undefined, tool: undefined })
    },
    get: (runId) => drives.get(runId),
    stepOf: (drive, runId, step) => {
      if (drive.step?.number === step) return drive.step
      endStep(drive)
      const parent = contextOf(drive)
      const span = tracer().startSpan(SpanName.step, { attributes: { [SpanAttribute.runId]: runId, [SpanAttribute.step]: step } }, parent)
      drive.step = { number: step, span, parent }
      return drive.step
    },
    underStep: (step, name, options) => tracer().startSpan(name, options, contextOf(step)),
    endTool,
    endAttempt,
    endStep,
    end,
    traceparent: (runId) => {
      const drive = drives.get(runId)
      return drive === undefined ? undefined : formatTraceparent((drive.step ?? drive).span.spanContext())
    }
  }
}
