import { describe, expect, it } from 'vitest'
import { makeCircuitBreakers } from '@agentvisor/actors'

const policy = { failureThreshold: 3, cooldownMs: 1000 }

describe('circuit breakers', () => {
  it('opens after N consecutive transient failures and skips the provider until the cooldown', () => {
    const b = makeCircuitBreakers(policy)
    for (const t of [0, 1, 2]) b.record('p', b.admit('p', t), 'transient', t)
    expect(b.admit('p', 3)).toBe('open')
    expect(b.admit('p', 1001)).toBe('open')
    expect(b.admit('p', 1002)).toBe('probe')
  })

  it('lets exactly one probe through; a good probe closes the circuit, a bad one re-opens it', () => {
    const b = makeCircuitBreakers(policy)
    for (const t of [0, 1, 2]) b.record('p', b.admit('p', t), 'transient', t)
    const probe = b.admit('p', 2000)
    expect(probe).toBe('probe')
    expect(b.admit('p', 2000)).toBe('open')
    b.record('p', probe, 'transient', 2001)
    expect(b.admit('p', 2500)).toBe('open')
    const second = b.admit('p', 3001)
    expect(second).toBe('probe')
    b.record('p', second, 'success', 3002)
    expect(b.admit('p', 3003)).toBe('closed')
  })

  it('is never tripped by auth or request errors', () => {
    const b = makeCircuitBreakers(policy)
    for (let t = 0; t < 10; t++) b.record('p', b.admit('p', t), 'other', t)
    expect(b.admit('p', 11)).toBe('closed')
  })

  it('counts only consecutive transient failures: a success in between resets the count', () => {
    const b = makeCircuitBreakers(policy)
    b.record('p', 'closed', 'transient', 0)
    b.record('p', 'closed', 'transient', 1)
    b.record('p', 'closed', 'success', 2)
    b.record('p', 'closed', 'transient', 3)
    b.record('p', 'closed', 'transient', 4)
    expect(b.admit('p', 5)).toBe('closed')
  })

  it('releases an abandoned probe so the next dispatch may probe again', () => {
    const b = makeCircuitBreakers(policy)
    for (const t of [0, 1, 2]) b.record('p', b.admit('p', t), 'transient', t)
    const probe = b.admit('p', 5000)
    b.record('p', probe, 'abandoned', 5001)
    expect(b.admit('p', 5002)).toBe('probe')
  })

  it('keeps one circuit per provider endpoint', () => {
    const b = makeCircuitBreakers(policy)
    for (const t of [0, 1, 2]) b.record('a', b.admit('a', t), 'transient', t)
    expect(b.admit('a', 3)).toBe('open')
    expect(b.admit('b', 3)).toBe('closed')
  })
})
