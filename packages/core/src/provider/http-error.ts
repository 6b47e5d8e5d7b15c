import type { ProviderErrorKind } from '../errors.js'

/**
 * The error kind an HTTP status means (CONTRACT.md §3): 401/403 auth; 400/404/422 and other 4xx
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
