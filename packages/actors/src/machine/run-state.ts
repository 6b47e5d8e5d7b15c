import type { RunStatus } from '@agentvisor/store'
import type { StateValue } from 'xstate'

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
  return FINAL_STATUS[path] ?? 'running'
}

/** Whether a state path is one of the final `finished.*` states. */
export const isFinalPath = (path: string): boolean => path.startsWith('finished.')
