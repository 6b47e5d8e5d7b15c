import { ProviderError, type ProviderErrorKind } from '../errors.js'
import { makeSecretSet, type SecretSet } from '../secrets/secret-set.js'

/**
 * The error kind an HTTP status means (docs/cli.md): 401/403 auth; 400/404/422 and other 4xx
 * request; 408/409/429 and 5xx transient. Only transient errors are worth another attempt.
 */
export const kindOfStatus = (status: number): ProviderErrorKind => {
  if (status === 401 || status === 403) return 'auth'
  if (status === 408 || status === 409 || status === 429 || status >= 500) return 'transient'
  return 'request'
}

/**
 * Parses a Retry-After header: delta-seconds or an HTTP date. Also honours the
 * `retry-after-ms` header some providers send. Returns milliseconds, or undefined.
 */
export const parseRetryAfter = (
  retryAfter: string | null | undefined,
  retryAfterMs?: string | null | undefined,
  now: number = Date.now()
): number | undefined => {
  if (retryAfterMs != null && retryAfterMs.trim() !== '') {
    const ms = Number(retryAfterMs)
    if (Number.isFinite(ms) && ms >= 0) return ms
  }
  if (retryAfter == null || retryAfter.trim() === '') return undefined
  const seconds = Number(retryAfter)
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1000 : undefined
  const date = Date.parse(retryAfter)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

/** The header lookup both SDKs' errors expose (a fetch `Headers`), kept narrow so core owns no SDK type. */
export interface HeaderLookup {
  get(name: string): string | null
}

/** Milliseconds a response asks us to wait, from its `retry-after-ms` or `retry-after` header. */
export const retryAfterFromHeaders = (headers: HeaderLookup | null | undefined, now: number = Date.now()): number | undefined =>
  headers == null ? undefined : parseRetryAfter(headers.get('retry-after'), headers.get('retry-after-ms'), now)

// Wordings of "the prompt does not fit" across OpenAI, Anthropic, vLLM and llama.cpp. Kept specific:
// a 429 about "tokens per minute" is rate limiting, not overflow.
const CONTEXT_OVERFLOW =
  /context[_ ]length[_ ]exceeded|maximum context length|context window|exceeds? the context|prompt is too long|too many tokens in (the )?prompt/i

/**
 * True when an error code or message says the request cannot fit the model's context. Retrying the
 * same request cannot help, so it is a `request` error whatever status carried it.
 */
export const isContextOverflow = (...texts: ReadonlyArray<string | null | undefined>): boolean =>
  texts.some((text) => text != null && CONTEXT_OVERFLOW.test(text))

/**
 * Replaces every form of `secret` in `text` (raw, trimmed, JSON- and URL-encoded: `secretForms`),
 * so a server echoing a key cannot leak it into a trace. Adapters redact with a `SecretSet`.
 */
export const redactSecret = (text: string, secret: string | undefined): string => makeSecretSet([secret]).redact(text)

// No secrets: what a mapping without a set redacts with.
const NO_SECRETS: SecretSet = makeSecretSet()

/** What the mappings below redact with: a set, or (as before sets existed) the one key. */
export type Redaction = SecretSet | string | undefined

const asSecrets = (redaction: Redaction): SecretSet =>
  redaction === undefined ? NO_SECRETS : typeof redaction === 'string' ? makeSecretSet([redaction]) : redaction

/** The first line of an error text, bounded: provider messages end up in run traces and `--json` output. */
const oneLine = (text: string): string => {
  const line = text.split('\n')[0]!.trim()
  return line.length > 500 ? `${line.slice(0, 497)}...` : line
}

/** The first string `code` in an error's cause chain (`ECONNREFUSED`, `UND_ERR_SOCKET`, ...). */
export const networkErrorCode = (error: unknown): string | undefined => {
  let current: unknown = error
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string' && code !== '') return code
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}

// Failures that happen before a single byte of the request can reach the server. Anything else
// (reset, socket hang up, an unknown code) may have been processed, and is reported as such.
const NEVER_CONNECTED = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_HAS_EXPIRED'
])

/** The deepest message of an error's cause chain: `fetch failed` says less than what caused it. */
const innermostMessage = (error: unknown): string | undefined => {
  let message: string | undefined
  let current: unknown = error
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (current.message !== '') message = current.message
    current = current.cause
  }
  return message
}

/** What an adapter learned from a response with an error status, independent of the SDK that read it. */
export interface HttpStatusFailure {
  readonly status: number
  readonly headers?: HeaderLookup | null | undefined
  /** The SDK's or server's message; redacted and cut to one line here. */
  readonly message: string
  /** A machine-readable code from the body (`context_length_exceeded`, `overloaded_error`, ...). */
  readonly code?: string | null | undefined
  readonly cause?: unknown
}

/**
 * Maps an HTTP error status faithfully (docs/cli.md): the status picks the kind, a context
 * overflow is a `request` error whatever the status, Retry-After is kept for the backoff.
 */
export const providerErrorFromStatus = (provider: string, failure: HttpStatusFailure, redaction?: Redaction): ProviderError => {
  const secrets = asSecrets(redaction)
  const overflow = failure.status !== 401 && failure.status !== 403 && failure.status !== 429 && isContextOverflow(failure.code, failure.message)
  // Redacted before it is cut: a key split by the cut would no longer be found.
  const message = oneLine(secrets.redact(failure.message))
  return new ProviderError({
    kind: overflow ? 'request' : kindOfStatus(failure.status),
    provider,
    httpStatus: failure.status,
    retryAfterMs: retryAfterFromHeaders(failure.headers),
    message: overflow ? `context length exceeded: ${message}` : message,
    cause: failure.cause
  })
}

/**
 * A request that got no HTTP response: always transient. `possiblyDelivered` unless the error
 * proves the connection was never made (ECONNREFUSED, DNS failure, connect timeout), because a
 * reset after connecting may come after the server accepted the work.
 */
export const providerErrorFromConnection = (
  provider: string,
  cause: unknown,
  options: { readonly timedOut?: boolean | undefined; readonly secrets?: Redaction; readonly secret?: string | undefined } = {}
): ProviderError => {
  const code = networkErrorCode(cause)
  const neverConnected = code !== undefined && NEVER_CONNECTED.has(code)
  const what = options.timedOut === true ? 'request timed out' : 'connection failed'
  const inner = innermostMessage(cause)
  const detail = code ?? (inner === undefined ? undefined : oneLine(asSecrets(options.secrets ?? options.secret).redact(inner)))
  return new ProviderError({
    kind: 'transient',
    provider,
    possiblyDelivered: !neverConnected,
    message: detail === undefined ? what : `${what}: ${detail}`,
    cause
  })
}

/**
 * A streamed answer that broke off (socket cut, error event, no finish reason): transient, the
 * model already worked on it, and the text received so far is kept for the trace.
 */
export const providerErrorFromStreamCut = (provider: string, cause: unknown, partialText: string, redaction?: Redaction): ProviderError => {
  const secrets = asSecrets(redaction)
  const code = networkErrorCode(cause)
  const inner = innermostMessage(cause)
  const detail = code ?? (inner === undefined ? undefined : oneLine(secrets.redact(inner)))
  return new ProviderError({
    kind: 'transient',
    provider,
    possiblyDelivered: true,
    // The model's own words, which can quote anything it was shown.
    partialText: secrets.redact(partialText),
    message: detail === undefined ? 'stream ended before the answer was complete' : `stream cut: ${detail}`,
    cause
  })
}
