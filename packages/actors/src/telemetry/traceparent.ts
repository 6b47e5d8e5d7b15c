import { type Context, isSpanContextValid, ROOT_CONTEXT, type SpanContext, trace } from '@opentelemetry/api'

// W3C Trace Context, version 00 (https://www.w3.org/TR/trace-context/#traceparent-header): how a
// run's span travels to another process (a child on a worker, a submitted run; docs/telemetry.md).
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
