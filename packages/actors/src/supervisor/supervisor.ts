import { randomUUID } from 'node:crypto'
import {
  ContractError,
  DEFAULT_RETRY_POLICY,
  makeProvider,
  makeSecretSet,
  type SecretSet,
  openWorkspace,
  type Provider,
  type ProviderConfig,
  type RetryPolicy,
  type RunError,
  type TaskContract,
  type Workspace,
  type WorkspaceError
} from '@agentvisor/core'
import { getRun, getRunRow, insertRun, listChildren, LeaseConflictError, LeaseLostError, makeRunWriter, type RunStatus, StoreError } from '@agentvisor/store'
import { Cause, Chunk, Clock, Context, Duration, Effect, Either, Fiber, Layer } from 'effect'
import { type Actor, createActor, type InspectionEvent } from 'xstate'
import { RunNotFoundError, RunNotResumableError } from '../errors.js'
import { machineInput, runMachine } from '../machine/run-machine.js'
import { decodeRunSnapshot } from '../machine/run-snapshot.js'
import { isFinalPath, statusOfState } from '../machine/run-state.js'
import { type CircuitBreakerPolicy, DEFAULT_CIRCUIT_BREAKER, makeCircuitBreakers } from './circuit-breaker.js'
import { openingMessages, rebuildConversation, type StepRecord } from './conversation.js'
import { type Approver, makeRunDriver, type RunDriver } from './run-driver.js'
import { runPolicyOf } from '../approval/run-policy.js'
import { DEFAULT_LEASE_POLICY, dropLease, type LeasePolicy, makeLeaseOwner, takeLease } from './lease.js'
import { makeLeaseKeeper, storeLeaseQueries } from './lease-keeper.js'
import { makeStopSignal, type StopSignal } from './stop-signal.js'
import { makeRunFibers } from './run-fibers.js'
import { store as storeCall } from './driver-io.js'
import type { Bus } from '../bus/bus.js'
import { busObserver } from '../bus/bus-observer.js'
import { type TelemetryOptions, telemetryObserver } from '../telemetry/telemetry-observer.js'
import { giveUpChild, handleChildDelivery } from '../worker/child-worker.js'
import { causeLine, surviving } from '../loop/survive.js'
import { oneLine } from '../loop/one-line.js'
import { childContract, childRunRow } from '../children/child-contract.js'
import { PROTOCOL_VERSION } from '../bus/messages.js'
import { makeControlHandler } from '../worker/control-handler.js'
import { notify, type RunObserver } from './run-observer.js'
import { StoreService } from './store-service.js'
import { requestRunCancel } from '../use-cases/cancel.js'

/** How a run ended (or paused): the `--json` shape of `run` and `resume` (docs/cli.md, `--json`). */
export interface RunResult {
  readonly runId: string
  readonly status: RunStatus
  readonly steps: number
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
  /** XState inspection events of every run actor (the Stately inspector, tests). */
  readonly inspect?: (event: InspectionEvent) => void
  /** When a failing provider is skipped; one set of circuits serves every run of this supervisor. */
  readonly circuitBreaker?: CircuitBreakerPolicy
  /** Lease length and cancel polling (one driver per run, `agentvisor cancel` from anywhere). */
  readonly lease?: LeasePolicy
  /**
   * How runs travel: child runs are submitted to it, transitions and ends published on it.
   * Without a bus, `spawn_child` is not offered.
   */
  readonly bus?: Bus
  /** Drive child runs from the bus in this process (a worker), this many at a time. */
  readonly serveChildren?: { readonly concurrency: number }
  /** Answer control requests (cancel, approve, status) from the bus in this process. */
  readonly serveControl?: boolean
  /** One line per child run this process starts and ends (the worker's log). */
  readonly log?: (line: string) => void
  /** Answers `ask`s of runs whose contract says `approval: prompt` (without one they pause). */
  readonly approver?: Approver
  /** Builds a provider from its config; the default reads the task file's kinds. */
  readonly makeProvider?: (config: ProviderConfig, env: NodeJS.ProcessEnv, secrets: SecretSet) => Provider
}

/** A child run as code asks for one: the `spawn_child` arguments. */
export interface ChildSpec {
  readonly goal: string
  readonly verify?: unknown
  readonly limits?: Partial<Record<'maxSteps' | 'maxRetries' | 'dispatchCeiling' | 'timeoutMs', number>>
  readonly workspace?: string
}

export interface StartOptions {
  readonly parentId?: string | undefined
  /** Answers this run's `ask`s (overrides the supervisor's approver). */
  readonly approver?: Approver | undefined
  readonly observers?: ReadonlyArray<RunObserver>
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

/** Why a run could not be started or resumed. */
export type LaunchError = StoreError | WorkspaceError | RunNotFoundError | RunNotResumableError | LeaseConflictError | LeaseLostError

const DEFAULT_ATTEMPT_TIMEOUT_MS = 120_000

/** Why a drive stopped without its run ending: another driver took it over, or the store failed. */
type LetGo = { readonly kind: 'lost' } | { readonly kind: 'store'; readonly error: StoreError }

const resultOf = (runId: string, driver: RunDriver, letGo: LetGo | undefined): RunResult => {
  const ctx = driver.context()
  if (letGo?.kind === 'lost') {
    // Another driver took the run over; what this one remembers is no longer the run's state.
    return {
      runId,
      status: 'running',
      steps: ctx.completedSteps,
      error: { kind: 'internal', message: `run ${runId}: this driver's lease was taken over by another driver` }
    }
  }
  if (letGo?.kind === 'store') {
    // The store refused a write (disk full, connection lost): the run is interrupted where the
    // store has it, never `failed` for a fault of the store; `resume` goes on once it is back.
    const { state, steps } = driver.durable()
    return {
      runId,
      status: statusOfState(state),
      steps,
      error: {
        kind: 'internal',
        message: `${oneLine(letGo.error.message)}; the run is interrupted in ${state} and goes on with \`agentvisor resume ${runId}\` once the store is back`
      }
    }
  }
  return {
    runId,
    status: statusOfState(driver.currentPath()),
    steps: ctx.completedSteps,
    ...(ctx.error !== null ? { error: ctx.error } : {})
  }
}

/** The supervisor layer; it needs the store. */
export const SupervisorLive = (options: SupervisorOptions = {}): Layer.Layer<Supervisor, never, StoreService> =>
  Layer.scoped(
    Supervisor,
    Effect.gen(function* () {
      const storeService = yield* StoreService
      const { db } = storeService
      const writer = makeRunWriter(storeService)
      // Failures a loop survives are logged with their cause: to the worker's log, else stderr.
      const warn = options.log ?? ((line: string) => void process.stderr.write(`agentvisor: ${line}\n`))
      // Runs before the store closes (layers close in reverse): the checkpointer ends first. A
      // last write that fails is reported, not a defect of the closing layer.
      yield* Effect.addFinalizer(() =>
        Effect.tryPromise(() => writer.close()).pipe(
          Effect.catchAllCause((cause) => Effect.sync(() => warn(`cannot close the run writer: ${causeLine(cause)}`)))
        )
      )
      const env = options.env ?? process.env
      const buildProvider = options.makeProvider ?? makeProvider
      // Every key any run of this supervisor uses: a tool of one run can read another's key
      // from this process's environment, so each run redacts them all (docs/task-file.md).
      const secrets = makeSecretSet()
      const breakers = makeCircuitBreakers(options.circuitBreaker ?? DEFAULT_CIRCUIT_BREAKER)

      // A run's observers: telemetry and the supervisor's, then the run's own, then the bus's.
      // Every run that brings none of its own shares one list.
      const leading: ReadonlyArray<RunObserver> = [
        ...(options.telemetry === false ? [] : [telemetryObserver(options.telemetry ?? {})]),
        ...(options.observers ?? [])
      ]
      const trailing: ReadonlyArray<RunObserver> = options.bus !== undefined ? [busObserver(options.bus, db)] : []
      const shared: ReadonlyArray<RunObserver> = [...leading, ...trailing]
      const observersOf = (startOptions: StartOptions): ReadonlyArray<RunObserver> =>
        startOptions.observers === undefined || startOptions.observers.length === 0 ? shared : [...leading, ...startOptions.observers, ...trailing]
      const leasePolicy = options.lease ?? DEFAULT_LEASE_POLICY
      const leaseOwner = makeLeaseOwner()
      const leases = yield* makeLeaseKeeper(storeLeaseQueries(db), leaseOwner, leasePolicy, warn)
      const runFibers = makeRunFibers()
      let driving = 0
      // One closure for all drivers: made in `launch`, it would keep that call's whole scope alive.
      const concurrentRuns = (): number => driving

      /**
       * Runs one driver to its end under the run's deadline, its cancel signal (local or written
       * to the store by another process) and its lease: losing the lease stops it at once.
       */
      const supervise = (
        runId: string,
        driver: RunDriver,
        actor: Actor<typeof runMachine>,
        deadline: number,
        stop: StopSignal,
        observers: ReadonlyArray<RunObserver>,
        leaseToken: number,
        cancelRequested: boolean,
        /** Created by this very call: nothing of it can have been left in flight, so nothing to recover. */
        fresh: boolean
      ): Effect.Effect<RunResult> => {
        let stoppedBy: LetGo | undefined
        const unwatch = leases.watch(runId, leaseToken, stop.leaseEvents)
        const drive = Effect.gen(function* () {
          // A run cancelled while nobody drove it (paused, or interrupted) just ends. A cancel
          // that comes later reaches the driver through the lease keeper.
          if (cancelRequested) {
            yield* storeCall('settle lost attempts', () => writer.settlePending(runId, leaseToken, 'unknown', new Date().toISOString()))
            yield* driver.commit({ event: { type: 'CANCEL' } })
            yield* driver.cancelChildren
            return
          }
          if (!fresh) yield* driver.recover
          stop.arm(deadline - (yield* Clock.currentTimeMillis))
          const stopped = yield* stop.race(driver.drive, driver.afterInterrupt)
          // By now the drive fiber is interrupted and its finalizers (tool process groups,
          // in-flight provider calls) have run: the final transition is the last thing written.
          if (stopped === 'cancel') yield* driver.commit({ event: { type: 'CANCEL' } })
          if (stopped === 'timeout') yield* driver.commit({ event: { type: 'TIMEOUT' } })
          // A cancelled or timed-out parent takes its children with it.
          if (stopped !== 'settled') yield* driver.cancelChildren
        })
        /** A lost lease or a failing store lets the run go as it is; anything else fails it. */
        const letGoFor = (error: unknown): LetGo | undefined =>
          error instanceof LeaseLostError ? { kind: 'lost' } : error instanceof StoreError ? { kind: 'store', error } : undefined
        const failed = (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
          for (const error of Cause.failures(cause)) stoppedBy ??= letGoFor(error)
          if (stoppedBy !== undefined) return Effect.void
          return driver
            .commit({ event: { type: 'FAIL', error: { kind: 'internal', message: secrets.redact(internalMessage(cause)) } } })
            .pipe(Effect.catchAll((error) => Effect.sync(() => (stoppedBy = letGoFor(error)))))
        }
        const finished = Effect.sync(() => {
          const result = resultOf(runId, driver, stoppedBy)
          notify(observers, 'onFinished', result, warn)
          return result
        })
        const letGo = Effect.ensuring(
          Effect.suspend(() => {
            unwatch()
            stop.dispose()
            actor.stop()
            return dropLease(writer, runId, leaseToken)
          }),
          Effect.sync(() => (driving -= 1))
        )
        // Few combinators on purpose: each one is a frame every idle run keeps on its fiber's stack.
        return Effect.ensuring(Effect.zipRight(Effect.catchAllCause(drive, failed), finished), letGo)
      }

      const launch = (
        runId: string,
        contract: TaskContract,
        actor: Actor<typeof runMachine>,
        steps: ReadonlyArray<StepRecord> | undefined,
        seq: number,
        createdAt: string,
        startOptions: StartOptions,
        /** The token of a run created with its lease; a resumed run takes the lease here. */
        createdWithToken?: number,
        cancelRequested = false,
        /** The workspace `start` already opened (a resume opens it here). */
        opened?: Workspace
      ): Effect.Effect<RunHandle, WorkspaceError | StoreError | RunNotResumableError | RunNotFoundError | LeaseConflictError | LeaseLostError> =>
        Effect.gen(function* () {
          const leaseToken = createdWithToken ?? (yield* takeLease(writer, runId, leaseOwner, leasePolicy))
          const loaded = yield* runPolicyOf(writer, contract)
          // A run whose policy cannot be built never runs permissively: it does not run.
          if (Either.isLeft(loaded)) return yield* new RunNotResumableError({ runId, reason: loaded.left })
          const policy = loaded.right
          const workspace = opened ?? (yield* openWorkspace(contract.workspace))
          const deadline = Date.parse(createdAt) + contract.limits.timeoutMs
          const observers = observersOf(startOptions)
          // Known before the first step: a fallback's key can be printed by a tool before that
          // provider is ever asked. A key read later (rotated) is added when it is read.
          for (const config of contract.providers) if (config.apiKeyEnv !== undefined) secrets.add(env[config.apiKeyEnv])
          const driver = makeRunDriver({
            db,
            writer,
            runId,
            contract,
            providers: contract.providers.map((config) => buildProvider(config, env, secrets)),
            workspace,
            actor,
            messages: steps === undefined ? openingMessages(contract) : rebuildConversation(contract, steps),
            seq,
            observers,
            retryPolicy: options.retryPolicy ?? DEFAULT_RETRY_POLICY,
            deadline,
            attemptTimeoutMs: options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS,
            breakers,
            policy,
            approver: startOptions.approver ?? options.approver,
            newId: randomUUID,
            leaseToken,
            bus: options.bus,
            concurrentRuns,
            endUndrivenChild,
            warn,
            secrets
          })
          const stop = makeStopSignal(runId)
          driving += 1
          const fiber = yield* runFibers.fork(
            supervise(runId, driver, actor, deadline, stop, observers, leaseToken, cancelRequested, createdWithToken !== undefined)
          )
          return {
            runId,
            // Built when awaited: whoever holds the handle of an idle run does not hold a join too.
            result: Effect.suspend(() => Fiber.join(fiber)),
            cancel: Effect.sync(stop.cancel),
            fiber
          }
        })

      const start = (contract: TaskContract, startOptions: StartOptions = {}) =>
        Effect.gen(function* () {
          // A workspace that cannot be opened (a file, no permission) fails the start before
          // any row exists: a run that never began leaves nothing half made in the store.
          const workspace = yield* openWorkspace(contract.workspace)
          const runId = randomUUID()
          const createdAt = new Date(yield* Clock.currentTimeMillis).toISOString()
          const parentId = startOptions.parentId ?? null
          // A task carries no lineage (docs/task-file.md): a run started under a parent joins
          // the parent's tree, whose root is the parent's own root, or the parent if it is one.
          const parent = parentId === null || contract.lineage !== undefined ? undefined : yield* storeCall('load the parent run', () => getRun(db, parentId))
          const row = childRunRow(runId, parentId, contract, createdAt)
          if (parent?.root_id != null) row.root_id = parent.root_id
          const expiresAt = Date.parse(createdAt) + leasePolicy.ttlMs
          const token = yield* storeCall('create the run', () => writer.createRun(row, { owner: leaseOwner, expiresAt }))
          const actor = createActor(runMachine, { input: machineInput(contract), ...inspectOption(options) })
          actor.start()
          return yield* launch(runId, contract, actor, undefined, 0, createdAt, startOptions, token, false, workspace)
        })

      const resume = (runId: string, startOptions: StartOptions = {}) =>
        Effect.gen(function* () {
          const loaded = yield* storeCall(`load run ${runId}`, () => writer.loadRun(runId))
          if (loaded === undefined) return yield* new RunNotFoundError({ runId })
          // The contract and steps come decoded: a corrupt one failed the load (docs/durability.md, "Corrupt rows").
          const { run, last, steps } = loaded
          const { contract } = run
          const decoded = last === undefined ? Either.right(undefined) : decodeRunSnapshot(last.snapshot_json)
          if (Either.isLeft(decoded)) return yield* new RunNotResumableError({ runId, reason: `its last snapshot ${decoded.left}` })
          const snapshot = decoded.right
          const actor = yield* Effect.try({
            try: () =>
              createActor(runMachine, {
                input: machineInput(contract),
                ...(snapshot === undefined ? {} : { snapshot: snapshot as never }),
                ...inspectOption(options)
              }).start(),
            catch: () => new RunNotResumableError({ runId, reason: 'its last snapshot does not fit the run machine' })
          })
          const records = steps.map(
            (row): StepRecord => ({
              text: row.text,
              toolCalls: row.tool_calls,
              results: row.results ?? undefined,
              feedback: row.feedback ?? undefined
            })
          )
          const handle = yield* launch(
            runId,
            contract,
            actor,
            records,
            last?.seq ?? 0,
            run.created_at,
            startOptions,
            undefined,
            run.cancel_requested_at !== null
          )
          return handle
        })

      // A child with its cancel requested and no driver ends here: resuming it writes only its
      // final transition (and ends its own children the same way). One that another driver took
      // meanwhile is that driver's to end.
      function endUndrivenChild(childId: string): Effect.Effect<void> {
        return Effect.flatMap(resume(childId), (handle) => handle.result).pipe(
          Effect.asVoid,
          Effect.catchAllCause((cause) =>
            isLeaseConflict(cause) ? Effect.void : Effect.sync(() => warn(`cannot end child run ${childId}: ${causeLine(cause)}`))
          )
        )
      }

      const bus = options.bus
      if (bus !== undefined && options.serveChildren !== undefined) {
        const { concurrency } = options.serveChildren
        // A bus that cannot be reached yet (NATS restarting) is tried again, not given up on; a
        // concurrency that can never work is said once.
        if (!Number.isInteger(concurrency) || concurrency < 1) {
          warn(`cannot consume child runs: concurrency must be a positive integer, got ${concurrency}`)
        } else {
          yield* Effect.forkScoped(
            surviving(
              'consume child runs',
              bus.consumeChildren((delivery) => handleChildDelivery({ db, resume: (id) => resume(id), log: options.log }, delivery), {
                concurrency,
                log: warn,
                giveUp: (request, cause) => giveUpChild(db, request, cause)
              }),
              warn
            )
          )
        }
      }
      if (bus !== undefined && options.serveControl === true) {
        // Runs resumed for a control request go on in the background, like any other run.
        const drive = (runId: string) =>
          void Effect.runFork(
            Effect.flatMap(resume(runId), (h) => h.result).pipe(
              Effect.catchAllCause((cause) =>
                isLeaseConflict(cause) ? Effect.void : Effect.sync(() => warn(`cannot resume run ${runId} for a control request: ${causeLine(cause)}`))
              )
            )
          )
        yield* Effect.forkScoped(surviving('serve control requests', bus.serveControl(makeControlHandler({ db, drive }), { log: warn }), warn))
      }

      // Children are numbered by how many their parent has: spawns are taken one at a time.
      const spawnLock = yield* Effect.makeSemaphore(1)
      const insertChild = (runId: string, parentId: string, contract: TaskContract, at: string) =>
        Effect.tryPromise({
          try: () => insertRun(db, childRunRow(runId, parentId, contract, at)),
          catch: (cause) => new StoreError({ message: 'store: cannot create the child run', cause })
        })
      const spawn = (parentId: string, spec: ChildSpec) =>
        Effect.gen(function* () {
          if (bus === undefined) return yield* new ContractError({ message: 'child runs need a bus' })
          const parent = yield* storeCall('load the parent run', () => getRun(db, parentId))
          if (parent === undefined) return yield* new RunNotFoundError({ runId: parentId })
          const parentContract = parent.contract
          const runId = randomUUID()
          const at = new Date(yield* Clock.currentTimeMillis).toISOString()
          const made = yield* spawnLock.withPermits(1)(
            Effect.gen(function* () {
              const siblings = yield* storeCall('load the sibling runs', () => listChildren(db, parentId))
              const contract = childContract(parentContract, parentId, JSON.stringify(spec), siblings.length + 1)
              if (Either.isLeft(contract)) return yield* new ContractError({ message: contract.left })
              yield* insertChild(runId, parentId, contract.right, at)
              return contract
            })
          )
          yield* bus
            .submitChild({ v: PROTOCOL_VERSION, runId, parentId, contract: made.right })
            .pipe(Effect.mapError((error) => new StoreError({ message: `cannot hand the child to the bus: ${error.message}`, cause: error })))
          const ended = (status: string) => status !== 'running'
          // The store is the truth wherever the child runs: wait on it.
          const result: Effect.Effect<RunResult> = Effect.gen(function* () {
            for (;;) {
              // A store that fails is logged and asked again on a schedule; the wait goes on.
              const row = yield* surviving(
                `wait for child run ${runId}`,
                storeCall('load the child run', () => getRunRow(db, runId)),
                warn
              )
              if (row !== undefined && ended(row.status)) {
                return {
                  runId,
                  status: row.status,
                  steps: row.steps,
                  ...(row.error !== null ? { error: row.error } : {})
                }
              }
              yield* Effect.sleep(Duration.millis(200))
            }
          })
          const cancel = Effect.gen(function* () {
            // The store first (docs/durability.md: the request outlives any message), then the bus,
            // whose control handler ends the child if nobody drives it.
            yield* requestRunCancel(db, runId).pipe(Effect.catchAll((error) => Effect.sync(() => warn(`cannot cancel child run ${runId}: ${error.message}`))))
            // Nobody answering (the child is queued, or its worker is gone) is not a failure: the
            // request in the store reaches whoever drives it next.
            yield* bus.control(runId, 'cancel', { v: PROTOCOL_VERSION }, 2000).pipe(Effect.ignore)
          })
          return { runId, result, cancel } satisfies RunHandle
        })

      // Registered last, so it runs first as the layer closes: runs stop before the bus
      // consumers, the lease keeper and the store they use.
      yield* Effect.addFinalizer(() => runFibers.interruptAll)
      return { start, resume, spawn }
    })
  )

/** Another live driver holds the run: it is that driver's to move, nothing went wrong. */
const isLeaseConflict = (cause: Cause.Cause<unknown>): boolean => Cause.failures(cause).pipe(Chunk.some((error) => error instanceof LeaseConflictError))

const inspectOption = (options: SupervisorOptions) => (options.inspect === undefined ? {} : { inspect: options.inspect })

const internalMessage = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return oneLine(error instanceof Error ? error.message : String(error))
}

export { isFinalPath }
