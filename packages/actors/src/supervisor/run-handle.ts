import type { RunError, Usage } from '@agentvisor/core'
import type { LeaseConflictError, LeaseLostError, RunStatus, StoreError } from '@agentvisor/store'
import type { ContractError, TaskContract, WorkspaceError } from '@agentvisor/core'
import type { Effect, Fiber } from 'effect'
import type { FollowUpRefusedError, RunNotFoundError, RunNotResumableError } from '../errors.js'
import type { Approver } from '../driver/drive.js'
import type { RunObserver } from '../driver/run-observer.js'

/** How a run ended (or paused): the `--json` shape of `run` and `resume` (docs/cli.md, `--json`). */
export interface RunResult {
  readonly runId: string
  readonly status: RunStatus
  readonly steps: number
  /**
   * What a succeeded run produced (docs/agents.md, "Structured results"): its `final_answer`'s
   * arguments when its agent has an `output` schema, else its final answer's text.
   */
  readonly output?: unknown
  /** What this run's own model calls cost (docs/task-file.md, "Usage and budgets"). */
  readonly usage: Usage
  /** What the run and every run below it cost: given when the run started children. */
  readonly treeUsage?: Usage | undefined
  readonly error?: RunError | undefined
}

/** A run being driven by its fiber. */
export interface RunHandle {
  readonly runId: string
  /** Waits for the run to finish or pause. */
  readonly result: Effect.Effect<RunResult>
  /** Cancels the run: its fiber is interrupted, tool processes killed, and it ends `cancelled`. */
  readonly cancel: Effect.Effect<void>
  /**
   * The run's fiber when it is driven in this process: outside Effect, an observer on it waits
   * for the end at no cost, where running `result` takes a fiber of its own per waiting run.
   */
  readonly fiber?: Fiber.RuntimeFiber<RunResult>
}

/** A child run as code asks for one: the `spawn_child` arguments. */
export interface ChildSpec {
  readonly goal: string
  readonly verify?: unknown
  readonly limits?: Partial<Record<'maxSteps' | 'maxRetries' | 'dispatchCeiling' | 'timeoutMs' | 'maxTokens' | 'maxCostUsd', number>>
  readonly workspace?: string
}

export interface StartOptions {
  readonly parentId?: string | undefined
  /** Answers this run's `ask`s (overrides the supervisor's approver). */
  readonly approver?: Approver | undefined
  readonly observers?: ReadonlyArray<RunObserver>
  /**
   * On a resume: continue the finished run with this message as a new turn (docs/policy.md,
   * "Follow-ups"): the conversation so far, then the message, then a fresh `maxSteps` and timeout.
   */
  readonly followUp?: string | undefined
  /**
   * A W3C `traceparent` (`00-<trace id>-<span id>-<flags>`): the drive's spans join that trace,
   * under that span. A worker passes the one a child or submitted run arrived with (docs/telemetry.md).
   */
  readonly traceparent?: string | undefined
}

/**
 * Creating a run and restoring one from the store, each driven by one supervised fiber
 * (supervisor/launch-run.ts): what the Supervisor service's `start` and `resume` are.
 */
export interface LaunchRun {
  readonly start: (contract: TaskContract, startOptions?: StartOptions) => Effect.Effect<RunHandle, LaunchError>
  /** Fails with `LeaseConflictError` while another live driver moves the run. */
  readonly resume: (runId: string, startOptions?: StartOptions) => Effect.Effect<RunHandle, LaunchError>
}

/**
 * Starts a child of `parentId` from code (what `spawn_child` does for a model): the parent's
 * providers and policy, narrowed limits, a workspace inside the parent's; it runs wherever the
 * bus sends it. `result` waits for it to end (or pause). Made by supervisor/spawn.ts.
 */
export type SpawnChild = (parentId: string, child: ChildSpec) => Effect.Effect<RunHandle, LaunchError | ContractError>

/** Why a run could not be started or resumed. */
/** `ContractError`: the task's tools do not fit what the process offers (docs/tools.md). */
export type LaunchError =
  | StoreError
  | WorkspaceError
  | RunNotFoundError
  | RunNotResumableError
  | FollowUpRefusedError
  | LeaseConflictError
  | LeaseLostError
  | ContractError
