import { makeMcpPool } from '@agentvisor/core'
import type { ContractError, ModelSettings, Provider, ProviderConfig, RetryPolicy, SecretSet, TaskContract } from '@agentvisor/core'
import { DEFAULT_STORE_OUTAGE_MS, makeRunWriter, type OutageRidingWriter, rideOutStoreOutages, type RunWriter } from '@agentvisor/store'
import { Context, Effect, Layer } from 'effect'
import type { InspectionEvent } from 'xstate'
import type { Bus } from '../protocol/bus.js'
import { busObserver } from '../bus/bus-observer.js'
import { makeSpawn } from '../supervisor/spawn.js'
import { causeLine } from '../loop/survive.js'
import { isFinalPath } from '../machine/run-state.js'
import { type TelemetryOptions, telemetryObserver } from '../telemetry/telemetry-observer.js'
import type { CircuitBreakerPolicy } from '../driver/circuit-breaker.js'
import { makeLaunchRun } from '../supervisor/launch-run.js'
import { DEFAULT_LEASE_POLICY, type LeasePolicy, makeLeaseOwner } from '../supervisor/lease.js'
import { makeLeaseKeeper, storeLeaseQueries } from '../supervisor/lease-keeper.js'
import type { Approver } from '../driver/run-driver.js'
import { makeRunFibers } from '../supervisor/run-fibers.js'
import type { RegisteredTool } from '../driver/run-tools.js'
import type { ChildSpec, InspectedRun, LaunchError, RunHandle, StartOptions } from '../supervisor/run-handle.js'
import type { RunObserver } from '../driver/run-observer.js'
import { serveBus } from './serve-bus.js'
import { StoreService } from '../supervisor/store-service.js'

export type { ChildSpec, InspectedRun, LaunchError, RunHandle, RunResult, StartOptions } from '../supervisor/run-handle.js'

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

/** Starts and resumes runs, one supervised fiber each, all interrupted when the layer closes. */
export class Supervisor extends Context.Tag('agentvisor/Supervisor')<
  Supervisor,
  {
    readonly start: (contract: TaskContract, options?: StartOptions) => Effect.Effect<RunHandle, LaunchError>
    /** Fails with `LeaseConflictError` while another live driver moves the run. */
    readonly resume: (runId: string, options?: StartOptions) => Effect.Effect<RunHandle, LaunchError>
    /**
     * Starts a child of `parentId` from code (what `spawn_child` does for a model): the parent's
     * providers and policy, narrowed limits, a workspace inside the parent's; it runs wherever
     * the bus sends it. `result` waits for it to end (or pause).
     */
    readonly spawn: (parentId: string, child: ChildSpec) => Effect.Effect<RunHandle, LaunchError | ContractError>
  }
>() {}

/**
 * The supervisor layer; it needs the store. Its concepts live apart: launching a run (start,
 * resume: launch-run.ts), driving it under its deadline, cancel and lease (supervise.ts),
 * children from code (children/spawn.ts) and what it serves from the bus (serve-bus.ts).
 */
export const SupervisorLive = (options: SupervisorOptions = {}): Layer.Layer<Supervisor, never, StoreService> =>
  Layer.scoped(
    Supervisor,
    Effect.gen(function* () {
      const storeService = yield* StoreService
      const { db } = storeService
      // Failures a loop survives are logged with their cause: to the worker's log, else stderr.
      const warn = options.log ?? ((line: string) => void process.stderr.write(`agentvisor: ${line}\n`))
      const { writer, riding } = outageWriter(makeRunWriter(storeService), storeService.sqlite === undefined, options.storeOutageMs, warn)
      // Runs before the store closes (layers close in reverse): the checkpointer ends first. A
      // last write that fails is reported, not a defect of the closing layer.
      yield* Effect.addFinalizer(() =>
        Effect.tryPromise(() => writer.close()).pipe(
          Effect.catchAllCause((cause) => Effect.sync(() => warn(`cannot close the run writer: ${causeLine(cause)}`)))
        )
      )

      // A run's observers: telemetry and the supervisor's, then the run's own, then the bus's.
      // Every run that brings none of its own shares one list.
      const leading: ReadonlyArray<RunObserver> = [
        ...(options.telemetry === false ? [] : [telemetryObserver(options.telemetry ?? {})]),
        ...(options.observers ?? [])
      ]
      const trailing: ReadonlyArray<RunObserver> = options.bus !== undefined ? [busObserver(options.bus, writer.lastStepText, db)] : []
      const shared: ReadonlyArray<RunObserver> = [...leading, ...trailing]
      const observersOf = (startOptions: StartOptions): ReadonlyArray<RunObserver> =>
        startOptions.observers === undefined || startOptions.observers.length === 0 ? shared : [...leading, ...startOptions.observers, ...trailing]
      const leasePolicy = options.lease ?? DEFAULT_LEASE_POLICY
      const leaseOwner = makeLeaseOwner()
      const leases = yield* makeLeaseKeeper(storeLeaseQueries(db), leaseOwner, leasePolicy, warn)
      const runFibers = makeRunFibers()
      // The MCP servers runs start: all ended when the layer closes, after the runs (finalizers run in reverse).
      const mcp = makeMcpPool()
      yield* Effect.addFinalizer(() => Effect.promise(() => mcp.close()))
      const { start, resume } = makeLaunchRun({ db, writer, options, warn, observersOf, leasePolicy, leaseOwner, leases, runFibers, mcp })

      yield* serveBus({ db, bus: options.bus, options, resume, warn })
      const spawn = yield* makeSpawn({ db, bus: options.bus, warn })

      // Registered last, so it runs first as the layer closes: runs stop before the bus
      // consumers, the lease keeper and the store they use. A commit waiting out a store outage
      // is uninterruptible: it stops waiting first, so closing never waits for the store.
      yield* Effect.addFinalizer(() =>
        Effect.zipRight(
          Effect.sync(() => riding?.stopWaiting()),
          runFibers.interruptAll
        )
      )
      return { start, resume, spawn }
    })
  )

export { isFinalPath }

/**
 * The writer runs use: one that rides out store outages for `limitMs` where the store can have
 * them (PostgreSQL; never SQLite, whose hot path stays synchronous), else the writer itself.
 */
const outageWriter = (
  writer: RunWriter,
  remote: boolean,
  limitMs: number | undefined,
  log: (line: string) => void
): { readonly writer: RunWriter; readonly riding: OutageRidingWriter | undefined } => {
  const limit = limitMs ?? DEFAULT_STORE_OUTAGE_MS
  if (!remote || limit <= 0) return { writer, riding: undefined }
  const riding = rideOutStoreOutages(writer, { limitMs: limit, log })
  return { writer: riding, riding }
}
