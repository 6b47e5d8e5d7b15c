import { describe, expect, it } from 'vitest'
import { newRunId } from '../src/run-id.js'

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** The Unix milliseconds a version-7 UUID carries in its first 48 bits. */
const timeOf = (id: string): number => Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16)

describe('a new run id', () => {
  it('is a version-7 UUID carrying the time it was made, so ids made later sort after', () => {
    const at = Date.parse('2026-12-03T07:30:00.123Z')
    const id = newRunId(at)
    expect(id).toMatch(V7)
    expect(timeOf(id)).toBe(at)
    expect(newRunId(at + 1) > id).toBe(true)
    expect(newRunId(at + 3_600_000) > newRunId(at + 1)).toBe(true)
  })

  it('differs from every other id made in the same millisecond', () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => newRunId(0)))
    expect(ids.size).toBe(10_000)
    for (const id of ids) expect(id).toMatch(V7)
  })
})
