import type { LeaseLostError, RunWrite, StoreError } from '@agentvisor/store'
import type { Effect } from 'effect'
import type { CallPlan } from '../approval/step-plan.js'
import { childRunRow } from '../protocol/child-contract.js'
import type { SpawnPlan } from './child-spawns.js'
import type { RunContext } from '../machine/run-machine.js'
import type { Drive } from './drive.js'
import type { Now } from './now.js'
import type { Work } from './transition-journal.js'

/**
 * The driver's side of child runs (child-runs.ts, child-spawns.ts and child-wait.ts do the work). `spawn_child` calls
 * create their children once (their ids derive from the call); the step waits in
 * `awaitingChildren` until all are done, then `acting` answers each with its child's result.
 */
export const planSpawns = (drive: Drive, calls: ReadonlyArray<CallPlan>, step: number): Now<SpawnPlan, StoreError | LeaseLostError> =>
  // Most steps spawn nothing: they share one answer, had at once, and read no child.
  calls.some(startsChild) ? drive.children.planSpawns(calls, step) : NO_SPAWNS

const NO_SPAWNS: SpawnPlan = { results: new Map(), newChildren: [], unfinished: false }

/** A call its run's children answer (`spawn_child`): child-spawns.ts plans those. */
const startsChild = (item: CallPlan): boolean => item.kind === 'run' && item.tool?.runsAs === 'child-run'

/** The step's new children, created in the commit that moves the run to `awaitingChildren`. */
export const spawnWork = (drive: Drive, spawns: SpawnPlan, at: string): Work => ({
  event: { type: 'CHILDREN_SPAWNED' },
  writes: spawns.newChildren.map((child): RunWrite => ({ op: 'insertRun', row: childRunRow(child.id, drive.deps.runId, child.contract, at) }))
})

/** `awaitingChildren`'s entry work: hands the step's children to the bus and waits for them all. */
export const awaitChildren = (drive: Drive, ctx: RunContext): Effect.Effect<Work, StoreError | LeaseLostError> => drive.children.awaitChildren(ctx.step)
