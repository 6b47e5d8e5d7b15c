import type { RunStatus } from '@agentvisor/store'
import type { SnapshotFrom, StateValue } from 'xstate'
import type { runMachine } from './run-machine.js'

/** A live snapshot of the run machine (here, below run-snapshot.ts and the transition cache, which both hold one). */
export type RunSnapshot = SnapshotFrom<typeof runMachine>

/** A state value of the run machine, as XState derives it from the machine's config. */
export type RunStateValue = SnapshotFrom<typeof runMachine>['value']

/** The dotted paths of a state value's leaves: `{ finished: 'failed' }` is `finished.failed`. */
type LeafPaths<V> = V extends string ? V : { [K in keyof V & string]: `${K}.${LeafPaths<V[K]>}` }[keyof V & string]

/**
 * Every state the run machine can rest in, derived from run-machine.ts: a table keyed by it
 * (the driver's entry work) stops compiling when a state is added without its entry.
 */
export type RunStatePath = LeafPaths<RunStateValue>

/** The run machine's state value as its typed dotted path. */
export const runStatePath = (value: RunStateValue): RunStatePath => statePath(value) as RunStatePath

/** A state value as the dotted path the trace shows: `dispatching`, `finished.succeeded`. */
export const statePath = (value: StateValue): string => {
  if (typeof value === 'string') return value
  const [key, child] = Object.entries(value)[0] ?? []
  if (key === undefined) return ''
  return child === undefined ? key : `${key}.${statePath(child as StateValue)}`
}

const FINAL_STATUS: Readonly<Record<string, RunStatus>> = {
  'finished.succeeded': 'succeeded',
  'finished.stepCapReached': 'step_cap',
  'finished.failed': 'failed',
  'finished.cancelled': 'cancelled',
  'finished.timedOut': 'timed_out'
}

/** The run status string (docs/cli.md, "Statuses and error kinds") a machine state stands for. */
export const statusOfState = (path: string): RunStatus => {
  if (path === 'awaitingApproval') return 'awaiting_approval'
  if (path === 'awaitingInput') return 'awaiting_input'
  return FINAL_STATUS[path] ?? 'running'
}

/** Whether a state path is one of the final `finished.*` states. */
export const isFinalPath = (path: string): boolean => path.startsWith('finished.')
