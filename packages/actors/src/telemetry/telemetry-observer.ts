import { SpanKind, SpanStatusCode, trace, type TracerProvider } from '@opentelemetry/api'
import type { RunObserver } from '../driver/run-observer.js'
import { makeDriveSpans } from './drive-spans.js'
import { SpanAttribute, SpanName, TRANSITION_EVENT } from './span-attributes.js'
import {
  dispatchAttributes,
  driveAttributes,
  finishedAttributes,
  finishedStatus,
  settledAttributes,
  settledStatus,
  toolAttributes,
  transitionAttributes
} from './span-records.js'

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
  const spans = makeDriveSpans(() => (options.tracerProvider ?? trace.getTracerProvider()).getTracer(TRACER_NAME))
  return {
    onDriveStarted: (info) => spans.open(info.runId, info.parentId, info.traceparent, driveAttributes(info)),

    onDispatch: (info) => {
      const drive = spans.get(info.runId)
      if (drive === undefined) return
      const step = spans.stepOf(drive, info.runId, info.step)
      spans.endAttempt(drive)
      const span = spans.underStep(step, SpanName.attempt, { kind: SpanKind.CLIENT, attributes: dispatchAttributes(info) })
      drive.attempt = { step: info.step, index: info.attempt, span }
    },

    onAttemptSettled: (info) => {
      const drive = spans.get(info.runId)
      if (drive === undefined) return
      const step = spans.stepOf(drive, info.runId, info.step)
      const open = drive.attempt
      // A skipped circuit makes no call, so no `onDispatch` opened its span: it is opened here.
      const span =
        open !== undefined && open.step === info.step && open.index === info.attempt
          ? open.span
          : spans.underStep(step, SpanName.attempt, { kind: SpanKind.CLIENT, attributes: { [SpanAttribute.operation]: 'chat' } })
      if (span !== open?.span) spans.endAttempt(drive)
      span.setAttributes(settledAttributes(info))
      const status = settledStatus(info)
      if (status !== undefined) span.setStatus(status)
      span.end()
      if (span === open?.span) drive.attempt = undefined
    },

    onToolCall: (info) => {
      const drive = spans.get(info.runId)
      if (drive === undefined) return
      const step = spans.stepOf(drive, info.runId, info.step)
      spans.endTool(drive)
      drive.tool = spans.underStep(step, SpanName.tool, { attributes: toolAttributes(info) })
    },

    onToolResult: (info) => {
      const drive = spans.get(info.runId)
      const span = drive?.tool
      if (drive === undefined || span === undefined) return
      // `info.output` is what the model reads (file contents, command output): never recorded.
      span.setAttribute(SpanAttribute.toolOk, info.ok)
      if (!info.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: 'the tool call did not succeed' })
      spans.endTool(drive)
    },

    onTransition: (t) => {
      const drive = spans.get(t.runId)
      if (drive === undefined) return
      drive.span.addEvent(TRANSITION_EVENT, transitionAttributes(t))
      // Verification closes a step (the next one, if any, starts with its dispatch); so does the end.
      if (t.event === 'VERIFY_PASSED' || t.event === 'VERIFY_FAILED' || t.to.startsWith('finished')) spans.endStep(drive)
    },

    onFinished: (result) => {
      const drive = spans.get(result.runId)
      if (drive === undefined) return
      drive.span.setAttributes(finishedAttributes(result))
      const status = finishedStatus(result)
      if (status !== undefined) drive.span.setStatus(status)
      spans.end(result.runId, drive)
    },

    traceparent: spans.traceparent,

    onDriveEnded: ({ runId }) => {
      const drive = spans.get(runId)
      if (drive === undefined) return
      // No `onFinished`: the runtime closed under the run, which stays resumable.
      drive.span.setAttributes({ [SpanAttribute.status]: 'running', [SpanAttribute.interrupted]: true })
      spans.end(runId, drive)
    }
  }
}
