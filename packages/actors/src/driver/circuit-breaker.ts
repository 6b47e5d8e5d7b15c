import type { ProviderConfig } from '@agentvisor/core'

/** When a provider's circuit opens and how long it stays open. Validated once, shared by all runs. */
export interface CircuitBreakerPolicy {
  /** Consecutive transient failures that open the circuit. */
  readonly failureThreshold: number
  /** How long an open circuit skips the provider before one probe call is let through. */
  readonly cooldownMs: number
}

export const DEFAULT_CIRCUIT_BREAKER: CircuitBreakerPolicy = { failureThreshold: 5, cooldownMs: 30_000 }

/** What a dispatch may do: call (`closed`), call as the single probe of a cooling circuit, or skip. */
export type Admission = 'closed' | 'probe' | 'open'

/** How a call that was admitted ended, as far as the breaker cares. */
export type CallOutcome = 'success' | 'transient' | 'other' | 'abandoned'

interface Circuit {
  failures: number
  openedAt: number | null
  probing: boolean
}

/**
 * One circuit per provider endpoint, shared by every run of a supervisor (so by the process).
 * A provider that keeps failing transiently is skipped ("circuit open", no call) until the
 * cooldown lets one probe through; a probe that succeeds closes it, one that fails re-opens it.
 * Auth and request errors say the provider is up: they never trip it.
 */
export interface CircuitBreakers {
  readonly admit: (key: string, now: number) => Admission
  readonly record: (key: string, admission: Admission, outcome: CallOutcome, now: number) => void
}

/** The endpoint identity a circuit belongs to: two tasks naming the same server share it. */
export const circuitKey = (config: ProviderConfig): string => {
  let key = circuitKeys.get(config)
  if (key === undefined) {
    key = config.kind === 'scripted' ? `scripted:${config.name}` : `${config.kind}:${config.baseUrl ?? ''}:${config.model ?? ''}`
    circuitKeys.set(config, key)
  }
  return key
}

// Asked at every dispatch of every run: a key built anew is a fresh string to hash for the
// circuits' map each time. A contract's provider configs are never changed, so each keeps its key.
const circuitKeys = new WeakMap<ProviderConfig, string>()

export const makeCircuitBreakers = (policy: CircuitBreakerPolicy = DEFAULT_CIRCUIT_BREAKER): CircuitBreakers => {
  const circuits = new Map<string, Circuit>()
  const circuitOf = (key: string): Circuit => {
    let circuit = circuits.get(key)
    if (circuit === undefined) {
      circuit = { failures: 0, openedAt: null, probing: false }
      circuits.set(key, circuit)
    }
    return circuit
  }
  return {
    admit: (key, now) => {
      const circuit = circuitOf(key)
      if (circuit.openedAt === null) return 'closed'
      if (circuit.probing || now < circuit.openedAt + policy.cooldownMs) return 'open'
      circuit.probing = true
      return 'probe'
    },
    record: (key, admission, outcome, now) => {
      const circuit = circuitOf(key)
      if (admission === 'probe') circuit.probing = false
      if (outcome === 'success') {
        circuit.failures = 0
        circuit.openedAt = null
      } else if (outcome === 'transient') {
        circuit.failures += 1
        if (admission === 'probe' || circuit.failures >= policy.failureThreshold) circuit.openedAt = now
      }
    }
  }
}
