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
  type TaskContract,
  type ToolCatalogue,
  type Workspace,
  type WorkspaceError,
  withRootHandle
} from '@agentvisor/core'
import {
  clearCancelRequest,
  countProviderDispatches,
  type Database,
  getRun,
  isFinalStatus,
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
import { FollowUpRefusedError, RunNotFoundError, RunNotResumableError } from '../errors.js'
import { causeLine } from '../loop/survive.js'
import { machineInput, type runMachine } from '../machine/run-machine.js'
import { decodeRunSnapshot } from '../machine/run-snapshot.js'
import { DEFAULT_CIRCUIT_BREAKER, makeCircuitBreakers } from '../driver/circuit-breaker.js'
import { openingMessages, rebuildConversation, type StepRecord, toolsChangedNote } from '../driver/conversation.js'
import { isLeaseConflict, type LeasePolicy, takeLease } from './lease.js'
import type { ControlHandler } from '../protocol/bus.js'
import type { LeaseKeeper } from './lease-keeper.js'
import { makeTreeBudgets } from '../driver/budget.js'
import { storedRunUsage, usageTally } from '../driver/run-usage.js'
import { makeRunDriver } from '../driver/run-driver.js'
import type { RunFibers } from './run-fibers.js'
import type { LaunchError, RunHandle, StartOptions } from './run-handle.js'
import type { RunObserver } from '../driver/run-observer.js'
import { makeOutageResume } from './outage-resume.js'
import { freshActors, restoredActor } from './run-actors.js'
import { makeRunCatalogues, toolNames } from './run-catalogues.js'
import { makeStopSignal } from './stop-signal.js'
import { handleOf, makeSupervise } from './supervise.js'
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

/**
 * Creating a run (`start`) or restoring one from the store (`resume`), and its driver: each
 * launched run is forked as one supervised fiber (supervise.ts).
 */
export const makeLaunchRun = (deps: LaunchDeps) => {
  const { db, writer, options, warn, observersOf, leasePolicy, leaseOwner, runFibers } = deps
  const env = options.env ?? process.env
  const buildProvider = options.makeProvider ?? makeProvider
  // Every key any run of this supervisor uses: a tool of one run can read another's key
  // from this process's environment, so each run redacts them all (docs/task-file.md).
  const secrets = makeSecretSet()
  const breakers = makeCircuitBreakers(options.circuitBreaker ?? DEFAULT_CIRCUIT_BREAKER)
  // Shared by every run this process drives: a tree's runs check its budget one at a time.
  const budgets = makeTreeBudgets()
  let driving = 0
  // One closure for all drivers: made in `launch`, it would keep that call's whole scope alive.
  const concurrentRuns = (): number => driving
  const resumeAfterOutage = makeOutageResume(db, warn, (runId) => resume(runId))
  const supervise = makeSupervise({
    writer,
    db,
    leases: deps.leases,
    secrets,
    warn,
    ended: () => (driving -= 1),
    afterStoreOutage: options.resumeAfterStoreOutage === true ? resumeAfterOutage : undefined
  })
  const newActor = freshActors(options)
  const catalogueOf = makeRunCatalogues({ tools: options.tools ?? [], mcp: deps.mcp, env, secrets })
  /**
   * Serves NATS control requests for one run this process drives (`serveOwnControl`), until the
   * returned fiber is interrupted; undefined when it does not. A decision taken here is recorded;
   * a run paused on it is driven on by a worker or `resume` (this drive has let go of it by then).
   */
  const serveOwnControl = (runId: string): Fiber.RuntimeFiber<void> | undefined => {
    const bus = options.bus
    if (options.serveOwnControl !== true || bus === undefined || bus.kind !== 'nats') return undefined
    // Best effort, as every publication: a bus that cannot subscribe leaves the workers to answer.
    return Effect.runFork(Effect.ignore(Effect.scoped(Effect.zipRight(bus.serveControl(deps.ownControl, { runId, log: warn }), Effect.never))))
  }

  /**
   * Where each provider of a resumed run stands (`ChatRequest.dispatch`), from its receipts. Only a
   * `scripted` provider or one of `options.makeProvider` reads it: a chain of real adapters, which
   * ignore it, costs a resume no query.
   */
  const providerDispatchesOf = (runId: string, contract: TaskContract): Effect.Effect<ReadonlyArray<number> | undefined, StoreError | LeaseLostError> => {
    if (options.makeProvider === undefined && !contract.providers.some((config) => config.kind === 'scripted')) return Effect.succeed(undefined)
    return Effect.map(countProviderDispatches(db, runId), (counts) => contract.providers.map((config) => counts.get(config.name) ?? 0))
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
    opened?: Workspace,
    /** The catalogue `start` already built (a resume builds it here). */
    built?: ToolCatalogue
  ): Effect.Effect<RunHandle, WorkspaceError | StoreError | RunNotResumableError | RunNotFoundError | LeaseConflictError | LeaseLostError | ContractError> =>
    Effect.gen(function* () {
      // A resume needs the tools its agent names here too: a worker without one refuses the run (docs/tools.md).
      const tools = built ?? (yield* catalogueOf(contract, false))
      const leaseToken = createdWithToken ?? (yield* takeLease(writer, runId, leaseOwner, leasePolicy))
      const loaded = yield* runPolicyOf(writer, contract)
      // A run whose policy cannot be built never runs permissively: it does not run.
      if (Either.isLeft(loaded)) return yield* new RunNotResumableError({ runId, reason: loaded.left })
      const policy = loaded.right
      // Its root held open while the run's fiber runs (supervise.ts), closed when it lets go.
      const { workspace, handle: rootHandle } = withRootHandle(opened ?? (yield* openWorkspace(contract.workspace)))
      // A turn's timeout counts from its start (docs/policy.md, "Follow-ups"); a run of one turn's from its creation.
      const turnAt = startOptions.followUp !== undefined ? Date.now() : actor.getSnapshot().context.turnAt
      const deadline = (turnAt ?? Date.parse(createdAt)) + contract.limits.timeoutMs
      const observers = observersOf(startOptions)
      // Known before the first step: a fallback's key can be printed by a tool before that
      // provider is ever asked. A key read later (rotated) is added when it is read.
      for (const name of contractSecretNames(contract)) secrets.add(env[name])
      // Subscribed before the drive starts, so before its `started` is published on the same
      // connection: whoever hears it can ask at once (docs/nats.md).
      const ownControl = serveOwnControl(runId)
      const driver = makeRunDriver({
        db,
        writer,
        runId,
        contract,
        providers: contract.providers.map((config) => buildProvider(config, env, secrets, contract.model)),
        providerDispatches: steps === undefined ? undefined : yield* providerDispatchesOf(runId, contract),
        workspace,
        actor,
        messages: steps === undefined ? openingMessages(contract) : resumedConversation(contract, steps, tools),
        seq,
        traceparent: startOptions.traceparent,
        observers,
        retryPolicy: options.retryPolicy ?? DEFAULT_RETRY_POLICY,
        deadline,
        attemptTimeoutMs: options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS,
        breakers,
        budgets,
        // A resumed run's tally starts from its receipts in the store.
        usage: steps === undefined ? usageTally(contract) : yield* storedRunUsage(writer, runId, contract),
        policy,
        approver: startOptions.approver ?? options.approver,
        newId: randomUUID,
        leaseToken,
        bus: options.bus,
        concurrentRuns,
        endUndrivenChild,
        warn,
        secrets,
        tools
      })
      const stop = makeStopSignal(runId)
      driving += 1
      const fiber = yield* runFibers.fork(
        supervise({
          runId,
          driver,
          actor,
          deadline,
          stop,
          observers,
          leaseToken,
          cancelRequested,
          fresh: createdWithToken !== undefined,
          rootHandle,
          followUp: startOptions.followUp === undefined ? undefined : { text: startOptions.followUp, at: turnAt ?? Date.now() }
        })
      )
      if (ownControl !== undefined) fiber.addObserver(() => void Effect.runFork(Fiber.interrupt(ownControl)))
      return handleOf(runId, fiber, stop)
    })

  const start = (contract: TaskContract, startOptions: StartOptions = {}): Effect.Effect<RunHandle, LaunchError> =>
    Effect.gen(function* () {
      // A workspace that cannot be opened (a file, no permission) fails the start before
      // any row exists: a run that never began leaves nothing half made in the store.
      const workspace = yield* openWorkspace(contract.workspace)
      // So are tools it names that nobody offers. A root whose children run in this process checks
      // the task's other agents too; where workers drive them, each worker checks its own tools.
      const tools = yield* catalogueOf(contract, contract.lineage === undefined && options.serveChildren !== undefined)
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
      // Among runs being driven, its row joins their group commit (docs/durability.md, "Group commit").
      const token = yield* writer.createRun(row, { owner: leaseOwner, expiresAt }, driving > 0 ? BATCH : undefined)
      const actor = newActor(contract, runId)
      return yield* launch(runId, contract, actor, undefined, 0, createdAt, startOptions, token, false, workspace, tools)
    })

  const resume = (runId: string, startOptions: StartOptions = {}): Effect.Effect<RunHandle, LaunchError> =>
    Effect.gen(function* () {
      const loaded = yield* writer.loadRun(runId)
      if (loaded === undefined) return yield* new RunNotFoundError({ runId })
      // The contract and steps come decoded: a corrupt one failed the load (docs/durability.md, "Corrupt rows").
      const { run, last, steps } = loaded
      const { contract } = run
      if (startOptions.followUp !== undefined) {
        // A follow-up continues a finished run that has a conversation to continue.
        if (!isFinalStatus(run.status)) return yield* new FollowUpRefusedError({ runId, reason: `it is ${run.status}: a follow-up continues a finished run` })
        if (steps.length === 0) return yield* new FollowUpRefusedError({ runId, reason: 'no model answer was ever recorded for it: start a new run' })
        // A cancel that ended the last turn does not end the next one.
        if (run.cancel_requested_at !== null) yield* clearCancelRequest(db, runId)
      }
      const decoded = last === undefined ? Either.right(undefined) : decodeRunSnapshot(last.snapshot_json, machineInput(contract))
      if (Either.isLeft(decoded)) return yield* new RunNotResumableError({ runId, reason: `its last snapshot ${decoded.left}` })
      const snapshot = decoded.right
      const actor = yield* Effect.try({
        try: () =>
          // A run interrupted before its first transition has no snapshot: it starts afresh.
          snapshot === undefined ? newActor(contract, runId) : restoredActor(options, contract, runId, snapshot),
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
      const cancelled = run.cancel_requested_at !== null && startOptions.followUp === undefined
      const handle = yield* launch(runId, contract, actor, records, last?.seq ?? 0, run.created_at, startOptions, undefined, cancelled)
      return handle
    })

  // A child with its cancel requested and no driver ends here: resuming it writes only its
  // final transition (and ends its own children the same way). One that another driver took
  // meanwhile is that driver's to end.
  function endUndrivenChild(childId: string): Effect.Effect<void> {
    return Effect.flatMap(resume(childId), (handle) => handle.result).pipe(
      Effect.asVoid,
      Effect.catchAllCause((cause) => (isLeaseConflict(cause) ? Effect.void : Effect.sync(() => warn(`cannot end child run ${childId}: ${causeLine(cause)}`))))
    )
  }

  return { start, resume }
}

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
