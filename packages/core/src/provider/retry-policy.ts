/**
 * When a step is retried after the whole fallback chain failed transiently: exponential backoff
 * with full jitter on the upper half, never sooner than the provider's Retry-After.
 * Validated once, read by the supervisor.
 */
export interface RetryPolicy {
  readonly baseDelayMs: number
  readonly maxDelayMs: number
  /** Fraction of the delay that is randomised (0 = deterministic). */
  readonly jitter: number
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { baseDelayMs: 500, maxDelayMs: 30_000, jitter: 0.5 }

/** Milliseconds to wait before retry number `retry` (0-based); `random` is injectable for tests. */
export const retryDelayMs = (policy: RetryPolicy, retry: number, retryAfterMs: number | undefined, random: () => number = Math.random): number => {
  const exponential = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry)
  const jittered = exponential * (1 - policy.jitter * random())
  return Math.round(Math.max(jittered, retryAfterMs ?? 0))
}
