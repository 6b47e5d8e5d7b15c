import type { ChildLimits, TaskContract } from '@agentvisor/core'
import {
  type Database,
  isFinalStatus,
  type LeaseLostError,
  listChildren,
  listSteps,
  type RunRow,
  type RunWithContract,
  type StepRow,
  type StoreError
} from '@agentvisor/store'
import { Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import type { CallPlan } from '../approval/step-plan.js'
import { childContract, childRunId } from '../protocol/child-contract.js'
import { storedOutput } from './conversation.js'

/** A `spawn_child` call's answer, once its child ended (or it was refused). */
export interface SpawnResult {
  readonly ok: boolean
  readonly output: string
}

/** What a step's `spawn_child` calls need: answers by call position, children to create, whether to wait. */
export interface SpawnPlan {
  readonly results: ReadonlyMap<number, SpawnResult>
  readonly newChildren: ReadonlyArray<{ readonly id: string; readonly contract: TaskContract }>
  /** Some child of the step has not ended yet: the run waits in `awaitingChildren`. */
  readonly unfinished: boolean
}

/** A call the run's children answer: one of a tool that runs as a child run (`spawn_child`). */
const startsChild = (item: CallPlan): item is Extract<CallPlan, { kind: 'run' }> => item.kind === 'run' && item.tool?.runsAs === 'child-run'

/**
 * What the parent's model is told of a finished child: in a task with agents, JSON `{runId,
 * status, steps, output, error?}` with the child's output (docs/agents.md, "Delegation"); in a
 * first-edition task, a line of text with its last answer.
 */
const describeChild = (parent: TaskContract, child: RunWithContract, steps: ReadonlyArray<StepRow>): string => {
  if (parent.agents === undefined) return describeChildText(child, [...steps].reverse().find((row) => row.text !== '')?.text ?? '')
  const output = child.status === 'succeeded' ? storedOutput(steps) : undefined
  return JSON.stringify({
    runId: child.id,
    status: child.status,
    steps: child.steps,
    output: output ?? null,
    ...(child.error !== null ? { error: { kind: child.error.kind, message: child.error.message } } : {})
  })
}

const describeChildText = (child: RunRow, lastText: string): string => {
  const error = child.error === null ? '' : ` (${child.error.kind}: ${child.error.message})`
  const said = lastText === '' ? '' : `\nIts last answer: ${lastText}`
  return `Child run ${child.id} ${child.status} after ${child.steps} step${child.steps === 1 ? '' : 's'}${error}.${said}`
}

/** What planning a run's spawns reads (child-runs.ts). */
export interface SpawnScope {
  readonly db: Kysely<Database>
  readonly runId: string
  readonly contract: TaskContract
  readonly limits: ChildLimits
  /** The run may start children: it has a bus and is shallower than the tree's depth cap. */
  readonly canSpawn: boolean
}

/** Answers finished or refused spawns; lists the children to create (ids derive from the call). */
export const planSpawns = (scope: SpawnScope, calls: ReadonlyArray<CallPlan>, step: number): Effect.Effect<SpawnPlan, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    const { db, runId, contract, limits, canSpawn } = scope
    const results = new Map<number, SpawnResult>()
    const newChildren: Array<{ id: string; contract: TaskContract }> = []
    let unfinished = false
    // Most steps spawn nothing: only a step that does reads its children.
    if (!calls.some(startsChild)) return { results, newChildren, unfinished }
    const existing = new Map((yield* listChildren(db, runId)).map((c) => [c.id, c]))
    let ordinal = existing.size
    for (const [position, item] of calls.entries()) {
      if (!startsChild(item)) continue
      if (!canSpawn) {
        results.set(position, {
          ok: false,
          output: `spawn_child is not available to this run (depth ${contract.lineage?.depth ?? 0} of at most ${limits.maxDepth}).`
        })
        continue
      }
      const id = childRunId(runId, step, position)
      const child = existing.get(id)
      if (child !== undefined) {
        if (isFinalStatus(child.status)) {
          const steps = yield* listSteps(db, id)
          results.set(position, { ok: child.status === 'succeeded', output: describeChild(contract, child, steps) })
        } else {
          unfinished = true
        }
        continue
      }
      if (ordinal >= limits.maxChildren) {
        results.set(position, { ok: false, output: `Refused: this run may start at most ${limits.maxChildren} child runs.` })
        continue
      }
      ordinal += 1
      const made = childContract(contract, runId, item.call.arguments, ordinal)
      if (Either.isLeft(made)) {
        results.set(position, { ok: false, output: made.left })
        continue
      }
      newChildren.push({ id, contract: made.right })
      unfinished = true
    }
    return { results, newChildren, unfinished }
  })
