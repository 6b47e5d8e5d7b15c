import type { ModelSettings, Provider, ProviderConfig, RetryPolicy, SecretSet, TaskContract } from '@agentvisor/core'
import type { InspectionEvent } from 'xstate'
import type { CircuitBreakerPolicy } from '../driver/circuit-breaker.js'
import type { Approver } from '../driver/drive.js'
import type { RegisteredTool } from '../driver/run-tools.js'
import type { InspectedRun, RunObserver } from '../driver/run-observer.js'
import type { Bus } from '../protocol/bus.js'
import type { TelemetryOptions } from '../telemetry/telemetry-observer.js'
import type { LeasePolicy } from './lease.js'

// What a supervisor is made with (api/supervisor.ts builds it; launch-run.ts and the bus's
// servers read it): declared here, below both, so launching a run needs nothing above supervision.

export interface SupervisorOptions {
  /** Where API keys are read from at dispatch time (default `process.env`). */
  readonly env?: NodeJS.ProcessEnv
  readonly retryPolicy?: RetryPolicy
  /** Deadline of one provider call when its config sets none (default 120 s). */
  readonly attemptTimeoutMs?: number
  /**
   * OpenTelemetry spans for runs, steps, attempts and tool calls (docs/telemetry.md). On by
   * default and free until a tracer provider is registered; `false` turns it off.
   */
  readonly telemetry?: false | TelemetryOptions
  /** Observers of every run this supervisor drives. */
  readonly observers?: ReadonlyArray<RunObserver>
  /**
   * XState inspection events of every run actor (the Stately inspector, tests), each with the run
   * it is of: the actor's id is the run's id.
   */
  readonly inspect?: (event: InspectionEvent, run: InspectedRun) => void
  /** When a failing provider is skipped; one set of circuits serves every run of this supervisor. */
  readonly circuitBreaker?: CircuitBreakerPolicy
  /** Lease length and cancel polling (one driver per run, `agentvisor cancel` from anywhere). */
  readonly lease?: LeasePolicy
  /**
   * How long a store outage (PostgreSQL restarted or unreachable) is ridden out, in ms: the
   * same commit tried again with backoff, nothing of the run happening meanwhile; past it, the
   * run is interrupted, resumable (docs/durability.md, "A store outage"). Default 60 000; 0:
   * interrupted at the first failure. SQLite has no outages to ride out.
   */
  readonly storeOutageMs?: number
  /**
   * Resume, in this process, the runs a store outage interrupted here (past `storeOutageMs`),
   * once the store answers again: it is probed with backoff meanwhile. What `agentvisor worker`
   * does; default false (a `run` reports the run interrupted instead).
   */
  readonly resumeAfterStoreOutage?: boolean
  /**
   * How runs travel: child runs are submitted to it, transitions and ends published on it.
   * Without a bus, `spawn_child` is not offered.
   */
  readonly bus?: Bus
  /** Drive child runs from the bus in this process (a worker), this many at a time. */
  readonly serveChildren?: { readonly concurrency: number }
  /** Answer control requests (cancel, approve, status) from the bus in this process. */
  readonly serveControl?: boolean
  /**
   * Take root runs submitted on the bus (`agentvisor.runs.submit`, docs/nats.md), laid over this
   * template and never allowed more than it: a validated task contract (`Agentvisor.contract`).
   */
  readonly serveSubmit?: { readonly template: TaskContract }
  /**
   * Answer control requests for each run this process drives, while it drives it, on the run's
   * own subjects (docs/nats.md): what a process that is not a worker does on NATS.
   */
  readonly serveOwnControl?: boolean
  /** One line per child run this process starts and ends (the worker's log). */
  readonly log?: (line: string) => void
  /** Answers `ask`s of runs whose contract says `approval: prompt` (without one they pause). */
  readonly approver?: Approver
  /**
   * Tools every run of this process may be offered (`defineTool` values made catalogue entries),
   * beside the built-ins: an agent is offered those its `tools` names (docs/tools.md).
   */
  readonly tools?: ReadonlyArray<RegisteredTool>
  /** Builds a provider from its config; the default reads the task file's kinds. */
  readonly makeProvider?: (config: ProviderConfig, env: NodeJS.ProcessEnv, secrets: SecretSet, settings?: ModelSettings) => Provider
}
