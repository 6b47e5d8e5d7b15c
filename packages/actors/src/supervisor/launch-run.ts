import { randomUUID } from 'node:crypto'
import {
  type ContractError,
  contractSecretNames,
  builtinCatalogue,
  DEFAULT_RETRY_POLICY,
  type McpPool,
  makeProvider,
  makeSecretSet,
  openWorkspace,
  type SecretSet,
  type TaskContract,
  type ToolCatalogue,
  type Workspace,
  type WorkspaceError,
  withRootHandle
} from '@agentvisor/core'
import {
  countProviderDispatches,
  type Database,
  getRun,
  type LeaseConflictError,
  type LeaseLostError,
  newRunId,
  type RunWriter,
  type StoreError
} from '@agentvisor/store'
import { Clock, Effect, Either, Fiber } from 'effect'
import type { Kysely } from 'kysely'
import type { Actor } from 'xstate'
import { runPolicyOf } from '../approval/run-policy.js'
import { childRunRow } from '../protocol/child-contract.js'
import { type RunNotFoundError, RunNotResumableError } from '../errors.js'
import { causeLine } from '../loop/survive.js'
import type { runMachine } from '../machine/run-machine.js'
import { type CircuitBreakers, DEFAULT_CIRCUIT_BREAKER, makeCircuitBreakers } from '../driver/circuit-breaker.js'
import { openingMessages, rebuildConversation, type StepRecord, toolsChangedNote } from '../driver/conversation.js'
import { isLeaseConflict, type LeasePolicy, takeLease } from './lease.js'
import type { ControlHandler } from '../protocol/bus.js'
import type { LeaseKeeper } from './lease-keeper.js'
import { makeTreeBudgets, type TreeBudgets } from '../driver/budget.js'
import { storedRunUsage, usageTally } from '../driver/run-usage.js'
import { makeRunDriver } from '../driver/run-driver.js'
import type { RunFibers } from './run-fibers.js'
import type { LaunchError, LaunchRun, RunHandle, RunResult, StartOptions } from './run-handle.js'
import type { RunObserver } from '../driver/run-observer.js'
import { makeOutageResume } from './outage-resume.js'
import { ownControlServer } from './own-control.js'
import { freshActors } from './run-actors.js'
import { makeRunCatalogues, toolNames } from './run-catalogues.js'
import { restoreRun } from './run-restore.js'
import { makeStopSignal } from './stop-signal.js'
import { handleOf, makeSupervise, type Supervised } from './supervise.js'
import type { SupervisorOptions } from './supervisor-options.js'

/** What launching runs needs from its supervisor. */
export interface LaunchDeps {
  readonly db: Kysely<Database>
  readonly writer: RunWriter
  readonly options: SupervisorOptions
  readonly warn: (line: string) => void
  /** A run's observers: the supervisor's, with the run's own where it brings some. */
  readonly observersOf: (startOptions: StartOptions) => ReadonlyArray<RunObserver>
  readonly leasePolicy: LeasePolicy
  readonly leaseOwner: string
  readonly leases: LeaseKeeper
  /**
   * Answers the control requests of a run this process drives (`serveOwnControl`): the bus's
   * control handler, made above supervision (api/supervisor.ts), which drives nothing itself.
   */
  readonly ownControl: ControlHandler
  readonly runFibers: RunFibers
  /** The process's MCP servers, started by the first run that names each (docs/tools.md). */
  readonly mcp: McpPool
}

const DEFAULT_ATTEMPT_TIMEOUT_MS = 120_000
/** A write that may share a group commit with other runs' (`BatchOption`). */
const BATCH = { batch: true } as const

/** What every run this process launches shares: the supervisor's deps, and what its drivers share. */
interface Launcher extends LaunchDeps {
  readonly env: NodeJS.ProcessEnv
  readonly buildProvider: NonNullable<SupervisorOptions['makeProvider']>
  /**
   * Every key any run of this supervisor uses: a tool of one run can read another's key from
   * this process's environment, so each run redacts them all (docs/task-file.md).
   */
  readonly secrets: SecretSet
  readonly breakers: CircuitBreakers
  /** Shared by every run this process drives: a tree's runs check its budget one at a time. */
  readonly budgets: TreeBudgets
  readonly supervise: (run: Supervised) => Effect.Effect<RunResult>
  readonly newActor: (contract: TaskContract, runId: string) => Actor<typeof runMachine>
  readonly catalogueOf: (contract: TaskContract, checkAgents: boolean) => Effect.Effect<ToolCatalogue, ContractError>
  /** Serves the control requests of a run it drives, when the process does (own-control.ts). */
  readonly ownControlOf: (runId: string) => Fiber.RuntimeFiber<void> | undefined
  /** How many runs it drives now; one closure for all drivers (made per launch, it would keep that call's whole scope alive). */
  readonly concurrentRuns: () => number
  readonly endUndrivenChild: (childId: string) => Effect.Effect<void>
  driving: number
}

/** One run to launch: a run `start` created, or one `resume` restored (run-restore.ts). */
interface Launch {
  readonly runId: string
  readonly contract: TaskContract
  readonly actor: Actor<typeof runMachine>
  /** A resumed run's stored steps; undefined for a new run. */
  readonly steps: ReadonlyArray<StepRecord> | undefined
  readonly seq: number
  readonly createdAt: string
  readonly startOptions: StartOptions
  /** The token of a run created with its lease; a resumed run takes the lease here. */
  readonly createdWithToken?: number | undefined
  readonly cancelRequested: boolean
  /** The workspace `start` already opened (a resume opens it here). */
  readonly opened?: Workspace | undefined
  /** The catalogue `start` already built (a resume builds it here). */
  readonly built?: ToolCatalogue | undefined
}

/**
 * Creating a run (`start`) or restoring one from the store (`resume`), and its driver: each
 * launched run is forked as one supervised fiber (supervise.ts).
 */
export const makeLaunchRun = (deps: LaunchDeps): LaunchRun => {
  const { db, writer, options, warn } = deps
  const env = options.env ?? process.env
  const secrets = makeSecretSet()
  const resumeAfterOutage = makeOutageResume(db, warn, (runId) => resume(runId))
  const launcher: Launcher = {
    ...deps,
    env,
    buildProvider: options.makeProvider ?? makeProvider,
    secrets,
    breakers: makeCircuitBreakers(options.circuitBreaker ?? DEFAULT_CIRCUIT_BREAKER),
    budgets: makeTreeBudgets(),
    supervise: makeSupervise({
      writer,
      db,
      leases: deps.leases,
      secrets,
      warn,
      ended: () => {
        launcher.driving -= 1
      },
      afterStoreOutage: options.resumeAfterStoreOutage === true ? resumeAfterOutage : undefined
    }),
    newActor: freshActors(options),
    catalogueOf: makeRunCatalogues({ tools: options.tools ?? [], mcp: deps.mcp, env, secrets }),
    ownControlOf: ownControlServer(options, deps.ownControl, warn),
    concurrentRuns: () => launcher.driving,
    endUndrivenChild: (childId) => endUndrivenChild(resume, childId, warn),
    driving: 0
  }
  const resume = (runId: string, startOptions: StartOptions = {}): Effect.Effect<RunHandle, LaunchError> =>
    Effect.flatMap(restoreRun(launcher, runId, startOptions), (restored) => launch(launcher, { runId, ...restored, startOptions }))
  return { start: (contract, startOptions = {}) => start(launcher, contract, startOptions), resume }
}

const start = (launcher: Launcher, contract: TaskContract, startOptions: StartOptions): Effect.Effect<RunHandle, LaunchError> =>
  Effect.gen(function* () {
    const { db, writer, options, leasePolicy, leaseOwner } = launcher
    // A workspace that cannot be opened (a file, no permission) fails the start before
    // any row exists: a run that never began leaves nothing half made in the store.
    const workspace = yield* openWorkspace(contract.workspace)
    // So are tools it names that nobody offers. A root whose children run in this process checks
    // the task's other agents too; where workers drive them, each worker checks its own tools.
    const tools = yield* launcher.catalogueOf(contract, contract.lineage === undefined && options.serveChildren !== undefined)
    const now = yield* Clock.currentTimeMillis
    // Time-ordered, so the runs being driven sit together in the store's B-trees (store run-id.ts).
    const runId = newRunId(now)
    const createdAt = new Date(now).toISOString()
    const parentId = startOptions.parentId ?? null
    // A task carries no lineage (docs/task-file.md): a run started under a parent joins
    // the parent's tree, whose root is the parent's own root, or the parent if it is one.
    const parent = parentId === null || contract.lineage !== undefined ? undefined : yield* getRun(db, parentId)
    // A task with tools of its own records what its agent had, for a resume to compare (docs/tools.md).
    const row = childRunRow(runId, parentId, tools === builtinCatalogue ? contract : { ...contract, startedWithTools: toolNames(tools) }, createdAt)
    if (parent?.root_id != null) row.root_id = parent.root_id
    const expiresAt = Date.parse(createdAt) + leasePolicy.ttlMs
    const driving = launcher.driving
    // Among runs being driven, its row joins their group commit (docs/durability.md, "Group commit").
    const token = yield* writer.createRun(row, { owner: leaseOwner, expiresAt }, driving > 0 ? BATCH : undefined)
    const actor = launcher.newActor(contract, runId)
    return yield* launch(launcher, {
      runId,
      contract,
      actor,
      steps: undefined,
      seq: 0,
      createdAt,
      startOptions,
      createdWithToken: token,
      cancelRequested: false,
      opened: workspace,
      built: tools
    })
  })

/** Builds the run's driver and forks it as one supervised fiber; its handle is the run's. */
const launch = (
  launcher: Launcher,
  run: Launch
): Effect.Effect<RunHandle, WorkspaceError | StoreError | RunNotResumableError | RunNotFoundError | LeaseConflictError | LeaseLostError | ContractError> =>
  Effect.gen(function* () {
    const { db, writer, options, env, secrets, runFibers } = launcher
    const { runId, contract, actor, steps, startOptions, createdWithToken } = run
    // A resume needs the tools its agent names here too: a worker without one refuses the run (docs/tools.md).
    const tools = run.built ?? (yield* launcher.catalogueOf(contract, false))
    const leaseToken = createdWithToken ?? (yield* takeLease(writer, runId, launcher.leaseOwner, launcher.leasePolicy))
    const loaded = yield* runPolicyOf(writer, contract)
    // A run whose policy cannot be built never runs permissively: it does not run.
    if (Either.isLeft(loaded)) return yield* new RunNotResumableError({ runId, reason: loaded.left })
    // Its root held open while the run's fiber runs (supervise.ts), closed when it lets go.
    const { workspace, handle: rootHandle } = withRootHandle(run.opened ?? (yield* openWorkspace(contract.workspace)))
    // A turn's timeout counts from its start (docs/policy.md, "Follow-ups"); a run of one turn's from its creation.
    const turnAt = startOptions.followUp !== undefined ? Date.now() : actor.getSnapshot().context.turnAt
    const deadline = (turnAt ?? Date.parse(run.createdAt)) + contract.limits.timeoutMs
    const observers = launcher.observersOf(startOptions)
    // Known before the first step: a fallback's key can be printed by a tool before that
    // provider is ever asked. A key read later (rotated) is added when it is read.
    for (const name of contractSecretNames(contract)) secrets.add(env[name])
    // Subscribed before the drive starts, so before its `started` is published on the same
    // connection: whoever hears it can ask at once (docs/nats.md).
    const ownControl = launcher.ownControlOf(runId)
    const driver = makeRunDriver({
      db,
      writer,
      runId,
      contract,
      providers: contract.providers.map((config) => launcher.buildProvider(config, env, secrets, contract.model)),
      providerDispatches: steps === undefined ? undefined : yield* providerDispatchesOf(launcher, runId, contract),
      workspace,
      actor,
      messages: steps === undefined ? openingMessages(contract) : resumedConversation(contract, steps, tools),
      seq: run.seq,
      traceparent: startOptions.traceparent,
      observers,
      retryPolicy: options.retryPolicy ?? DEFAULT_RETRY_POLICY,
      deadline,
      attemptTimeoutMs: options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS,
      breakers: launcher.breakers,
      budgets: launcher.budgets,
      // A resumed run's tally starts from its receipts in the store.
      usage: steps === undefined ? usageTally(contract) : yield* storedRunUsage(writer, runId, contract),
      policy: loaded.right,
      approver: startOptions.approver ?? options.approver,
      newId: randomUUID,
      leaseToken,
      bus: options.bus,
      concurrentRuns: launcher.concurrentRuns,
      endUndrivenChild: launcher.endUndrivenChild,
      warn: launcher.warn,
      secrets,
      tools
    })
    const stop = makeStopSignal(runId)
    launcher.driving += 1
    const fiber = yield* runFibers.fork(
      launcher.supervise({
        runId,
        driver,
        actor,
        deadline,
        stop,
        observers,
        leaseToken,
        cancelRequested: run.cancelRequested,
        fresh: createdWithToken !== undefined,
        rootHandle,
        followUp: startOptions.followUp === undefined ? undefined : { text: startOptions.followUp, at: turnAt ?? Date.now() }
      })
    )
    if (ownControl !== undefined) fiber.addObserver(() => void Effect.runFork(Fiber.interrupt(ownControl)))
    return handleOf(runId, fiber, stop)
  })

/**
 * Where each provider of a resumed run stands (`ChatRequest.dispatch`), from its receipts. Only a
 * `scripted` provider or one of `options.makeProvider` reads it: a chain of real adapters, which
 * ignore it, costs a resume no query.
 */
const providerDispatchesOf = (
  launcher: Launcher,
  runId: string,
  contract: TaskContract
): Effect.Effect<ReadonlyArray<number> | undefined, StoreError | LeaseLostError> => {
  const { db, options } = launcher
  if (options.makeProvider === undefined && !contract.providers.some((config) => config.kind === 'scripted')) return Effect.succeed(undefined)
  return Effect.map(countProviderDispatches(db, runId), (counts) => contract.providers.map((config) => counts.get(config.name) ?? 0))
}

// A child with its cancel requested and no driver ends here: resuming it writes only its
// final transition (and ends its own children the same way). One that another driver took
// meanwhile is that driver's to end.
const endUndrivenChild = (resume: LaunchRun['resume'], childId: string, warn: (line: string) => void): Effect.Effect<void> =>
  Effect.flatMap(resume(childId), (handle) => handle.result).pipe(
    Effect.asVoid,
    Effect.catchAllCause((cause) => (isLeaseConflict(cause) ? Effect.void : Effect.sync(() => warn(`cannot end child run ${childId}: ${causeLine(cause)}`))))
  )

/**
 * A resumed run's conversation: its stored steps, and, when the tools its agent has now are not
 * those it started with (a module or an MCP server changed), a note telling the model what changed.
 */
const resumedConversation = (contract: TaskContract, steps: ReadonlyArray<StepRecord>, tools: ToolCatalogue) => {
  const messages = rebuildConversation(contract, steps)
  const note = contract.startedWithTools === undefined ? undefined : toolsChangedNote(contract.startedWithTools, toolNames(tools))
  if (note !== undefined) messages.push({ role: 'user', content: note })
  return messages
}
