import { Either } from 'effect'
import { describe, expect, it } from 'vitest'
import { childContract } from '@agentvisor/actors'
import { parseTaskContract, type TaskContract } from '@agentvisor/core'

const parent = (sandbox?: unknown): TaskContract =>
  Either.getOrThrow(
    parseTaskContract(
      { goal: 'parent', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }], ...(sandbox === undefined ? {} : { sandbox }) },
      '/base'
    )
  )

describe('a child contract', () => {
  it("carries its parent's sandbox, which the spawn_child call cannot loosen", () => {
    const confined = parent({ exec: 'bwrap' })
    const child = childContract(confined, 'parent-id', JSON.stringify({ goal: 'child', sandbox: { exec: 'none' } }), 1)
    expect(Either.getOrThrow(child).sandbox).toEqual({ exec: 'bwrap', network: false })
    const networked = childContract(parent({ exec: 'bwrap', network: true }), 'parent-id', JSON.stringify({ goal: 'child' }), 1)
    expect(Either.getOrThrow(networked).sandbox).toEqual({ exec: 'bwrap', network: true })
  })

  it('runs unconfined only when its parent does', () => {
    expect(Either.getOrThrow(childContract(parent(), 'parent-id', JSON.stringify({ goal: 'child' }), 1)).sandbox).toBeUndefined()
  })
})
