import type { TaskContract } from '@agentvisor/core'
import { type Actor, createActor, type InspectionEvent, type Snapshot } from 'xstate'
import type { InspectedRun } from '../driver/run-observer.js'
import { machineInput, type RunMachineInput, runMachine } from '../machine/run-machine.js'
import type { PersistedRunSnapshot } from '../machine/run-snapshot.js'
import type { SupervisorOptions } from './supervisor-options.js'

// A run's XState actor, as launch-run.ts starts it: fresh for a new run (each machine input's
// first snapshot worked out once), restored from its last snapshot for a resumed one, and carrying
// the run's identity to an inspector when the supervisor has one.

/**
 * With an inspector, a run's actor carries the run's id (the Stately inspector names it so) and
 * each inspection event says which run it is of, with its parent and root (docs/telemetry.md).
 */
const inspectOption = (options: SupervisorOptions, runId: string, contract: TaskContract) => {
  const inspect = options.inspect
  if (inspect === undefined) return {}
  const run: InspectedRun = { runId, parentId: contract.lineage?.parentId, rootId: contract.lineage?.rootId ?? runId }
  return { id: runId, inspect: (event: InspectionEvent) => inspect(event, run) }
}

/** The actor of a resumed run, from its last snapshot (throws when the snapshot does not fit the machine). */
export const restoredActor = (options: SupervisorOptions, contract: TaskContract, runId: string, snapshot: PersistedRunSnapshot): Actor<typeof runMachine> =>
  createActor(runMachine, { input: machineInput(contract), snapshot: snapshot as never, ...inspectOption(options, runId, contract) }).start()

/**
 * An input's cache key: every field of `RunMachineInput`. A field added to the input and not
 * here does not compile (`rest` must be empty), so two inputs never share a first snapshot.
 */
const inputKey = (input: RunMachineInput): string => {
  const { maxSteps, maxRetries, dispatchCeiling, providerCount, timeoutMs, ...rest } = input
  const nothingElse: Record<string, never> = rest
  void nothingElse
  return `${maxSteps} ${maxRetries} ${dispatchCeiling} ${providerCount} ${timeoutMs}`
}

/** How many distinct machine inputs (limits, provider count) keep their first snapshot. */
const INITIAL_SNAPSHOTS = 64

/**
 * Starts the actor of a run that has no transition yet. XState works a machine's first snapshot
 * out anew for each actor (its context, its initial state, a check for eventless transitions):
 * about as much as the rest of a run's start. The same input always gives the same snapshot, so
 * each input's is worked out once and every later actor restores a copy of it. The run machine
 * has no entry actions on its way in (docs/architecture.md, "Start-up"), so a restored first
 * snapshot is the run's first snapshot. With an inspector, actors start the ordinary way: it
 * sees each one's initial event.
 */
export const freshActors = (options: SupervisorOptions): ((contract: TaskContract, runId: string) => Actor<typeof runMachine>) => {
  if (options.inspect !== undefined)
    return (contract, runId) => createActor(runMachine, { input: machineInput(contract), ...inspectOption(options, runId, contract) }).start()
  const firstSnapshots = new Map<string, Snapshot<unknown>>()
  return (contract) => {
    const input = machineInput(contract)
    const key = inputKey(input)
    const first = firstSnapshots.get(key)
    if (first === undefined) {
      const actor = createActor(runMachine, { input }).start()
      if (firstSnapshots.size < INITIAL_SNAPSHOTS) firstSnapshots.set(key, actor.getPersistedSnapshot())
      return actor
    }
    // A copy each: XState keeps the objects it restores as the actor's own.
    const { context, historyValue, children } = first as unknown as Record<'context' | 'historyValue' | 'children', object>
    const snapshot = { ...first, context: { ...context }, historyValue: { ...historyValue }, children: { ...children } }
    return createActor(runMachine, { input, snapshot: snapshot as never }).start()
  }
}
