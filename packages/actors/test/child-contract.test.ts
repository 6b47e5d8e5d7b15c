import { Either } from 'effect'
import { describe, expect, it } from 'vitest'
import { childContract, narrowChildRequest } from '@agentvisor/actors'
import { parseTaskContract, type TaskContract } from '@agentvisor/core'

const parent = (sandbox?: unknown, limits?: unknown): TaskContract =>
  Either.getOrThrow(
    parseTaskContract(
      {
        goal: 'parent',
        workspace: 'ws',
        providers: [{ name: 'p', kind: 'scripted', steps: [] }],
        ...(sandbox === undefined ? {} : { sandbox }),
        ...(limits === undefined ? {} : { limits })
      },
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

  it("inherits its parent's stall setting, which a spawn_child call can neither drop nor change", () => {
    const watched = parent(undefined, { stall: { window: 6 } })
    expect(watched.limits.stall).toEqual({ window: 6, repeats: 3 })
    const child = Either.getOrThrow(childContract(watched, 'parent-id', JSON.stringify({ goal: 'child', limits: { stall: { window: 50, repeats: 40 } } }), 1))
    expect(child.limits.stall).toEqual({ window: 6, repeats: 3 })
  })

  it('takes a stall setting the call gives where its parent has none', () => {
    const child = Either.getOrThrow(childContract(parent(), 'parent-id', JSON.stringify({ goal: 'child', limits: { stall: { repeats: 2 } } }), 1))
    expect(child.limits.stall).toEqual({ window: 8, repeats: 2 })
    expect(Either.getOrThrow(childContract(parent(), 'parent-id', JSON.stringify({ goal: 'child' }), 1)).limits.stall).toBeUndefined()
  })

  it("refuses a child request from the bus whose stall setting is not its parent's", () => {
    const watched = parent(undefined, { stall: { window: 6, repeats: 3 } })
    const own = Either.getOrThrow(childContract(watched, 'parent-id', JSON.stringify({ goal: 'child' }), 1))
    expect(Either.isRight(narrowChildRequest(watched, 'parent-id', own))).toBe(true)
    const loosened = { ...own, limits: { ...own.limits, stall: { window: 6, repeats: 30 } } }
    expect(narrowChildRequest(watched, 'parent-id', loosened)).toEqual(
      Either.left('limits.stall: {"repeats":30,"window":6} differs from the parent\'s {"repeats":3,"window":6}')
    )
    const { stall: _stall, ...unwatched } = own.limits
    expect(narrowChildRequest(watched, 'parent-id', { ...own, limits: unwatched })).toEqual(
      Either.left('limits.stall: off where the parent\'s is {"repeats":3,"window":6}')
    )
  })
})
