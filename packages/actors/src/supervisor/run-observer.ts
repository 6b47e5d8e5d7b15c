import type { RunError } from '@agentvisor/core'

/** A persisted transition, as `show --json` and `agentvisor.runs.<id>.events` carry it. */
export interface TransitionRecord {
  readonly runId: string
  readonly seq: number
  readonly from: string
  readonly event: string
  readonly to: string
  readonly at: string
}

/**
 * Progress hooks of a run, called after the fact they report is durable. The CLI prints them;
 * the bus publishes them. An observer that throws is ignored: watching never breaks a run.
 */
export interface RunObserver {
  readonly onTransition?: (transition: TransitionRecord) => void
  readonly onDispatch?: (info: { runId: string; step: number; attempt: number; provider: string; reason: string }) => void
  readonly onToolCall?: (info: { runId: string; step: number; name: string; target: string }) => void
  readonly onToolResult?: (info: { runId: string; step: number; name: string; ok: boolean; output: string }) => void
  readonly onFinished?: (result: { runId: string; status: string; steps: number; error?: RunError | undefined }) => void
}

/** Calls one hook of several observers, swallowing their failures. */
export const notify = <K extends keyof RunObserver>(
  observers: ReadonlyArray<RunObserver>,
  hook: K,
  payload: Parameters<NonNullable<RunObserver[K]>>[0]
): void => {
  for (const observer of observers) {
    try {
      ;(observer[hook] as ((p: typeof payload) => void) | undefined)?.(payload)
    } catch {
      // An observer's failure must not change the run.
    }
  }
}
