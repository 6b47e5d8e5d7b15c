import { spawnChildDefinition } from '@agentvisor/core'
import type { StepRow } from '@agentvisor/store'
import { childRunId } from './child-contract.js'

/**
 * Where each child of a run was spawned: its `spawn_child` call's step and position, as a rank
 * that sorts children in spawn order (docs/nats.md). The children of one step are created in one
 * commit, with one timestamp, and their ids are derived hashes, so neither orders them: the
 * parent's recorded calls do. Children started from code (`Agentvisor.spawn`) have no rank.
 */
export const spawnRanks = (parentId: string, steps: ReadonlyArray<Pick<StepRow, 'step' | 'tool_calls'>>): Map<string, number> => {
  const ranks = new Map<string, number>()
  for (const step of steps) {
    for (const [position, call] of step.tool_calls.entries()) {
      if (call.name === spawnChildDefinition.name) ranks.set(childRunId(parentId, step.step, position), step.step * 100_000 + position)
    }
  }
  return ranks
}

/** Children in spawn order: by creation, then by their rank among calls of one step, then by id. */
export const inSpawnOrder = <R extends { readonly id: string; readonly created_at: string }>(
  children: ReadonlyArray<R>,
  ranks: ReadonlyMap<string, number>
): R[] =>
  [...children].sort((a, b) => {
    if (a.created_at !== b.created_at) return a.created_at < b.created_at ? -1 : 1
    const ra = ranks.get(a.id) ?? Number.MAX_SAFE_INTEGER
    const rb = ranks.get(b.id) ?? Number.MAX_SAFE_INTEGER
    if (ra !== rb) return ra - rb
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0
  })
