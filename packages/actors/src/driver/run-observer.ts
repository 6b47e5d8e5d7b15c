import type { ErrorKind, ProviderConfig, RunError, Usage } from '@agentvisor/core'
import type { SettledAttemptOutcome } from '@agentvisor/store'
import type { DispatchReason } from '../machine/run-machine.js'

/** A persisted transition, as `show --json` and `agentvisor.runs.<id>.events` carry it. */
export interface TransitionRecord {
  readonly runId: string
  readonly seq: number
  readonly from: string
  readonly event: string
  readonly to: string
  readonly at: string
}

/** A piece of a streamed answer (`onText`). */
export interface TextDelta {
  readonly runId: string
  readonly step: number
  readonly attempt: number
  readonly afterSeq: number
  readonly delta: string
  readonly at: string
}

/** A driver took a run: a new run, or a resume (in this process, or after a crash elsewhere). */
export interface DriveStarted {
  readonly runId: string
  /** The parent of a child run (`spawn_child`, `Agentvisor.spawn`). */
  readonly parentId?: string | undefined
  /** The root of the run's tree, for a child run. */
  readonly rootId?: string | undefined
  /** Whether the run was driven before (a resume): its earlier steps are not part of this drive. */
  readonly resumed: boolean
  /** The state the drive starts in (`dispatching` for a new run) and the step it is at. */
  readonly state: string
  readonly step: number
  /** The run's goal, and the agent it runs (a delegate's name; absent for the task's own). */
  readonly goal?: string | undefined
  readonly agent?: string | undefined
  /** The W3C trace context the run was handed over under by another process (a parent, a submitter). */
  readonly traceparent?: string | undefined
}

/**
 * An attempt's receipt row, settled and durable: the same facts `show` reports in
 * `receipts[].attempts[]`. Skipped circuits (no call made) and cancelled calls are included.
 */
export interface AttemptSettled {
  readonly runId: string
  readonly step: number
  /** 0-based index within the step: the position of the attempt in its receipt. */
  readonly attempt: number
  readonly provider: string
  readonly providerKind: ProviderConfig['kind']
  readonly model?: string | undefined
  readonly reason: DispatchReason
  readonly outcome: SettledAttemptOutcome
  readonly errorKind?: ErrorKind | undefined
  readonly httpStatus?: number | undefined
  readonly latencyMs: number
  /** Time to the first streamed token; absent when not streamed. */
  readonly ttftMs?: number | undefined
  readonly tokensIn?: number | undefined
  readonly tokensOut?: number | undefined
}

/** The run an XState inspection event is of (`SupervisorOptions.inspect`). */
export interface InspectedRun {
  readonly runId: string
  /** The run's parent, for a child run. */
  readonly parentId?: string | undefined
  /** The root of its tree (the run itself for a root). */
  readonly rootId: string
}

/**
 * Progress hooks of a run, called after the fact they report is durable. The CLI prints them;
 * the bus publishes them. An observer that throws is logged once per hook: watching never breaks a run.
 */
export interface RunObserver {
  readonly onTransition?: (transition: TransitionRecord) => void
  readonly onDispatch?: (info: { runId: string; step: number; attempt: number; provider: string; reason: string }) => void
  /** `target`: a built-in's path or command ('' for other tools: their arguments are never shown); `source` and `effect`: the tool's, when known. */
  readonly onToolCall?: (info: { runId: string; step: number; name: string; target: string; source?: string; effect?: string }) => void
  readonly onToolResult?: (info: { runId: string; step: number; name: string; ok: boolean; output: string }) => void
  /**
   * A piece of the model's answer as it streams (docs/streaming.md), before the answer is recorded;
   * `afterSeq`: the last transition durable when it came. Never stored; redacted like all text.
   */
  readonly onText?: (info: TextDelta) => void
  readonly onFinished?: (result: {
    runId: string
    status: string
    steps: number
    output?: unknown
    usage?: Usage | undefined
    treeUsage?: Usage | undefined
    error?: RunError | undefined
  }) => void
  /** A driver took the run; every hook of the run until `onDriveEnded` belongs to this drive. */
  readonly onDriveStarted?: (info: DriveStarted) => void
  /** An attempt's receipt was settled (called after `onDispatch`, or alone for a skipped circuit). */
  readonly onAttemptSettled?: (info: AttemptSettled) => void
  /**
   * The driver let go of the run: after `onFinished` (finished, paused, lease lost), or alone when
   * the runtime closed under it (the run stays resumable).
   */
  readonly onDriveEnded?: (info: { runId: string }) => void
  /**
   * Not a hook: the W3C `traceparent` of the run's current span, if this observer traces runs.
   * A run hands it to the children it puts on the bus, so a tree across workers is one trace.
   */
  readonly traceparent?: (runId: string) => string | undefined
}

/** The first `traceparent` an observer knows for the run. */
export const traceparentOf = (observers: ReadonlyArray<RunObserver>, runId: string): string | undefined => {
  for (const observer of observers) {
    const value = observer.traceparent?.(runId)
    if (value !== undefined) return value
  }
  return undefined
}

// The hooks of each observer that threw already: a broken observer is reported once per hook,
// not once per transition of every run (docs/durability.md, "What is logged").
const reported = new WeakMap<RunObserver, Set<keyof RunObserver>>()

const report = (observer: RunObserver, hook: keyof RunObserver, error: unknown, log: (line: string) => void): void => {
  const hooks = reported.get(observer) ?? new Set()
  if (hooks.has(hook)) return
  hooks.add(hook)
  reported.set(observer, hooks)
  const text = (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? ''
  log(`a run observer's ${hook} threw (reported once per observer and hook; the run goes on): ${text.slice(0, 300)}`)
}

const stderrLine = (line: string): void => void process.stderr.write(`agentvisor: ${line}\n`)

/**
 * Whether any of `observers` has `hook`: a payload nobody reads is not built (an attempt's
 * settlement at every step, for a runtime whose observers have no such hook).
 */
export const listens = (observers: ReadonlyArray<RunObserver>, hook: keyof RunObserver): boolean => {
  for (const observer of observers) if (observer[hook] !== undefined) return true
  return false
}

/**
 * Calls one hook of several observers. One that throws does not change the run, nor stop the
 * others: its error is logged on `log` (default stderr), once per observer and hook.
 */
export const notify = <K extends keyof RunObserver>(
  observers: ReadonlyArray<RunObserver>,
  hook: K,
  payload: Parameters<NonNullable<RunObserver[K]>>[0],
  log: (line: string) => void = stderrLine
): void => {
  for (const observer of observers) {
    try {
      ;(observer[hook] as ((p: typeof payload) => void) | undefined)?.(payload)
    } catch (error) {
      report(observer, hook, error, log)
    }
  }
}
