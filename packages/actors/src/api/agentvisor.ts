import { ContractError, flattenChain, parseTaskContract, sandboxUnavailable, type TaskContract, type TaskInput } from '@agentvisor/core'
import type { RunRecord } from '@agentvisor/store'
import { Cause, Effect, Either, Exit, type Fiber, Layer, ManagedRuntime, Scope } from 'effect'
import type { Bus } from '../protocol/bus.js'
import { makeInProcessBus } from '../bus/in-process-bus.js'
import { makeNatsBus, type NatsBusOptions } from '../bus/nats-bus.js'
import { StoreLive, StoreService } from '../supervisor/store-service.js'
import { EventHub } from '../events/event-hub.js'
import { followEvents } from '../events/follow-events.js'
import type { RunStreamEvent } from '../protocol/run-stream-event.js'
import { type ApproveAnswer, type ApproveOutcome, approveRun } from '../use-cases/approve.js'
import { type AnswerOutcome, answerRun } from '../use-cases/answer.js'
import { type CancelOptions, type CancelOutcome, cancelRun } from '../use-cases/cancel.js'
import { type ForkOutcome, forkRun } from '../use-cases/fork.js'
import { loadRecording } from '../replay/recording.js'
import { type ReplayHost, type ReplayOptions, type ReplayReport, replayRecording } from '../replay/replay-run.js'
import { listRunRecords, type RunFilter } from '../use-cases/list.js'
import type { PendingRequest } from '../approval/pending-request.js'
import { pendingRequests } from '../use-cases/pending.js'
import { runTrace } from '../use-cases/trace.js'
import type { RunTrace } from '../trace/run-trace.js'
import type { ChildSpec, RunHandle, RunResult, StartOptions } from '../supervisor/run-handle.js'
import type { SupervisorOptions } from '../supervisor/supervisor-options.js'
import { Supervisor, SupervisorLive } from './supervisor.js'
import { runPromise } from '../loop/run-promise.js'

export interface AgentvisorOptions extends SupervisorOptions {
  /** The SQLite file of the store (created and migrated if absent). */
  readonly db: string
  /**
   * Child runs and control over NATS: children go to the JetStream work queue for
   * `agentvisor worker`s. Without it (and without `bus`), an in-process bus is used and this
   * process drives the children itself (the embedded default).
   */
  readonly nats?: NatsBusOptions
}

/** A run started from the TypeScript API. */
export interface StartedRun {
  readonly runId: string
  /** Resolves when the run finishes or pauses; it never rejects for a run's own failure. */
  readonly result: Promise<RunResult>
  readonly cancel: () => Promise<void>
  /** Starts a child of this run from code (see `Agentvisor.spawn`). */
  readonly spawn: (child: ChildSpec) => Promise<StartedRun>
  /** Once it finished: continues it with a follow-up message as a new turn (see `Agentvisor.send`). */
  readonly send: (text: string) => Promise<StartedRun>
  /**
   * The run's events (docs/streaming.md): those recorded from `fromSeq` (default: all), then each
   * new one, with the model's text as it streams, until the run finishes or this drive of it
   * pauses.
   *
   * @example
   * for await (const event of run.events()) if (event.kind === 'text') process.stdout.write(event.delta)
   */
  readonly events: (options?: EventsOptions) => AsyncIterable<RunStreamEvent>
}

/** Where a reader of a run's events starts. */
export interface EventsOptions {
  /** The first transition whose events are wanted (default 1: all of them). */
  readonly fromSeq?: number
  /** Stops the reading (leaving a `for await` early does too). */
  readonly signal?: AbortSignal
}

/**
 * The TypeScript entry point: open a store, start or resume runs, close.
 *
 * @example
 * const av = await Agentvisor.open({ db: '.agentvisor/agentvisor.db' })
 * const result = await av.run({ goal: 'Write DONE into out.txt', workspace: 'ws', providers: [...] })
 * await av.close()
 */
export class Agentvisor {
  private constructor(
    private readonly runtime: ManagedRuntime.ManagedRuntime<Supervisor | StoreService, unknown>,
    private readonly busScope: Scope.CloseableScope,
    /** The bus this instance uses (in-process by default). */
    readonly bus: Bus,
    private readonly hub: EventHub,
    /** What a replay's scratch `Agentvisor` takes over from this one: its registered tools and environment. */
    private readonly host: ReplayHost
  ) {}

  static async open(options: AgentvisorOptions): Promise<Agentvisor> {
    const outage = options.storeOutageMs
    if (outage !== undefined && !(Number.isFinite(outage) && outage >= 0)) {
      throw new TypeError(`storeOutageMs must be a number of milliseconds, 0 or more (got ${String(outage)})`)
    }
    const busScope = Effect.runSync(Scope.make())
    const embedded = options.bus === undefined && options.nats === undefined
    const bus = options.bus ?? (options.nats !== undefined ? await runPromise(Scope.extend(makeNatsBus(options.nats), busScope)) : makeInProcessBus())
    // Tells `events()` readers of runs driven here when to read again, and hands them the text as it streams.
    const hub = new EventHub()
    const supervisorOptions: SupervisorOptions = {
      ...options,
      observers: [...(options.observers ?? []), hub],
      bus,
      // Embedded: nobody else would drive the children or answer control requests.
      ...(embedded ? { serveChildren: options.serveChildren ?? { concurrency: 4 }, serveControl: options.serveControl ?? true } : {}),
      // On NATS, a process that is not a worker answers for the runs it drives (docs/nats.md).
      ...(!embedded && options.serveControl !== true ? { serveOwnControl: true } : {})
    }
    const layer = SupervisorLive(supervisorOptions).pipe(Layer.provideMerge(StoreLive(options.db)))
    const runtime = ManagedRuntime.make(layer)
    try {
      await unwrap(runtime, Effect.void)
    } catch (error) {
      await Effect.runPromise(Scope.close(busScope, Exit.void))
      throw error
    }
    return new Agentvisor(runtime, busScope, bus, hub, { tools: options.tools, env: options.env })
  }

  /**
   * Validates a task (the task-file shape, or an already validated `TaskContract`); relative
   * workspaces resolve against `baseDir` (default: the current folder). In the TS API the
   * `providers` chain may nest (see `fallback`). Throws `ContractError`.
   */
  static contract(task: unknown, baseDir: string = process.cwd()): TaskContract {
    const flat = typeof task === 'object' && task !== null && 'providers' in task ? { ...task, providers: flattenChain(task.providers) } : task
    const parsed = parseTaskContract(flat, baseDir)
    if (Either.isLeft(parsed)) throw parsed.left
    return parsed.right
  }

  /**
   * Starts a run and returns at once; `result` settles when it finishes or pauses. Throws
   * `ContractError` when the task asks for a sandbox this host cannot provide: such a task
   * never runs unconfined (docs/task-file.md, "sandbox").
   */
  async start(task: TaskInput | TaskContract, options: StartOptions = {}): Promise<StartedRun> {
    const contract = Agentvisor.contract(task)
    const unconfinable = await sandboxUnavailable(contract.sandbox)
    if (unconfinable !== undefined) throw new ContractError({ message: `sandbox.exec: ${unconfinable}`, field: 'sandbox.exec' })
    const started = this.hub.starts()
    try {
      return this.wrap(
        await unwrap(
          this.runtime,
          Effect.flatMap(Supervisor, (s) => s.start(contract, options))
        )
      )
    } finally {
      started()
    }
  }

  /** Starts a run and waits for it to finish or pause. */
  async run(task: TaskInput | TaskContract, options: StartOptions = {}): Promise<RunResult> {
    return (await this.start(task, options)).result
  }

  /**
   * Continues a finished run with a follow-up message as a new turn, under the same run id
   * (docs/policy.md, "Follow-ups"): the conversation so far, then `text` as the user's message,
   * then a fresh `maxSteps` and timeout. Rejects with `FollowUpRefusedError` for a run that has not
   * finished or never got an answer, `RunNotFoundError`, `LeaseConflictError`, `StoreError`.
   *
   * @example
   * const first = await av.run(task)
   * const second = await (await av.send(first.runId, 'Now add a section on costs')).result
   */
  async send(runId: string, text: string, options: StartOptions = {}): Promise<StartedRun> {
    return this.resume(runId, { ...options, followUp: text })
  }

  /** Continues an interrupted or paused run under the same run id. */
  async resume(runId: string, options: StartOptions = {}): Promise<StartedRun> {
    const started = this.hub.starts()
    try {
      return this.wrap(
        await unwrap(
          this.runtime,
          Effect.flatMap(Supervisor, (s) => s.resume(runId, options))
        )
      )
    } finally {
      started()
    }
  }

  /**
   * Forks a run from its state after transition `atSeq` and drives the fork (docs/typescript-api.md,
   * "Forks"): a new run with its own id, recording the original and seq, its journal and
   * conversation those of the original at that seq. The original is not touched; the workspace is
   * not rewound. Throws `ForkRefusedError` (a seq out of range, an ended or child-waiting state),
   * `RunNotFoundError`.
   *
   * @example
   * const fork = await av.fork(runId, { atSeq: 4 })
   * console.log(await fork.result)
   */
  async fork(runId: string, options: { readonly atSeq: number }): Promise<StartedRun & { readonly forkedFrom: ForkOutcome['forkedFrom'] }> {
    const made = await unwrap(
      this.runtime,
      Effect.flatMap(StoreService, (store) => forkRun(store.db, runId, options.atSeq))
    )
    return { ...(await this.resume(made.runId)), forkedFrom: made.forkedFrom }
  }

  /**
   * Replays an ended run (docs/replay.md): re-drives it from its start in a scratch workspace and a
   * scratch store, with a provider that plays its recorded answers in order, today's code, policy
   * and tools (`options.task` for today's task), and reports the first place it departs from the
   * record. The run's own workspace and rows are only read. Rejects with `RunNotFoundError`,
   * `ReplayRefusedError` (a run that has not ended), `StoreError`.
   *
   * @example
   * const report = await av.replay(runId)
   * if (!report.identical) console.error(report.departure?.message)
   */
  async replay(runId: string, options: ReplayOptions = {}): Promise<ReplayReport> {
    const recording = await unwrap(
      this.runtime,
      Effect.flatMap(StoreService, (store) => loadRecording(store.db, runId))
    )
    return replayRecording(recording, (scratch) => Agentvisor.open(scratch), options, this.host)
  }

  /**
   * Starts a child run of `parentId`: its own run id, `parentId` set, the parent's providers
   * and policy, limits no larger than the parent's, a workspace inside the parent's
   * (`children/<n>` unless `workspace` is given). It runs wherever the bus sends it: in this
   * process on the embedded bus, on a worker with NATS. Throws `ContractError` for a bad spec.
   *
   * @example
   * const parent = await av.start(task)
   * const children = await Promise.all(['a', 'b'].map((part) => parent.spawn({ goal: `Write part ${part}` })))
   * console.log(await Promise.all(children.map((c) => c.result)))
   */
  async spawn(parentId: string, child: ChildSpec): Promise<StartedRun> {
    return this.wrap(
      await unwrap(
        this.runtime,
        Effect.flatMap(Supervisor, (s) => s.spawn(parentId, child))
      )
    )
  }

  /**
   * Decides a run's pending requests (all of them, or `answer.requestId`), recorded with source
   * `api`; what `agentvisor approve`, the inspector and NATS do. The run goes on with `resume`.
   * Rejects with a tagged error: `RunNotFoundError`, `RequestNotFoundError`, `RequestDecidedError`,
   * `NothingPendingError`, `RecoveryDecisionNeededError`, `AmbiguousRequestError`,
   * `EditRefusedError`, `RunUnreadableError`, `StoreError` (docs/typescript-api.md).
   *
   * @example
   * const [request] = await av.pending(runId)
   * await av.approve(runId, { requestId: request.id, decision: 'approve', remember: true })
   * const resumed = await av.resume(runId)
   */
  approve(runId: string, answer: ApproveAnswer): Promise<ApproveOutcome> {
    return unwrap(
      this.runtime,
      Effect.flatMap(StoreService, (store) => approveRun({ db: store.db, source: 'api' }, runId, answer))
    )
  }

  /**
   * Answers a question the run's model asked (`ask_human`): its only one, or `requestId`'s;
   * recorded with source `api`, as `agentvisor answer` and NATS do. The run goes on with `resume`,
   * the answer being the call's result. Rejects with `RunNotFoundError`, `RequestNotFoundError`,
   * `RequestDecidedError` (answered already: the first answer wins), `NothingPendingError`,
   * `AmbiguousRequestError` (several questions wait: name one), `StoreError` (docs/typescript-api.md).
   *
   * @example
   * const [question] = (await av.pending(runId)).filter((r) => r.kind === 'input')
   * await av.answer(runId, 'Use the staging bucket', { requestId: question.id })
   * await (await av.resume(runId)).result
   */
  answer(runId: string, text: string, options: { readonly requestId?: string } = {}): Promise<AnswerOutcome> {
    return unwrap(
      this.runtime,
      Effect.flatMap(StoreService, (store) => answerRun({ db: store.db, source: 'api' }, runId, { text, requestId: options.requestId }))
    )
  }

  /**
   * Cancels a run wherever it is driven, as `agentvisor cancel` does: the request goes to the
   * store; a run nobody drives (paused, interrupted) is ended here; a run driven by another
   * process (or by this one) is waited for, up to `waitMs` (default 10 s; then
   * `CancelTimeoutError`, the request staying recorded). Resolves with the run's final status.
   */
  cancel(runId: string, options: CancelOptions = {}): Promise<CancelOutcome> {
    return unwrap(
      this.runtime,
      Effect.flatMap(Effect.all([Supervisor, StoreService]), ([supervisor, store]) =>
        cancelRun({ db: store.db, resume: (id) => Effect.flatMap(supervisor.resume(id), (handle) => handle.result) }, runId, options)
      )
    )
  }

  /** The requests a run waits on: `[{id, kind: 'approval' | 'recovery', step, act, target, arguments, rule, layer}]`, and its questions `{id, kind: 'input', step, question}`. */
  pending(runId: string): Promise<PendingRequest[]> {
    return unwrap(
      this.runtime,
      Effect.flatMap(StoreService, (store) => pendingRequests(store.db, runId))
    )
  }

  /** The runs as `agentvisor runs --json` lists them, optionally only those with `status` (or children of `parentId`). */
  list(filter: RunFilter = {}): Promise<RunRecord[]> {
    return unwrap(
      this.runtime,
      Effect.flatMap(StoreService, (store) => listRunRecords(store.db, filter))
    )
  }

  /**
   * Any run's whole trace (docs/typescript-api.md, "Reading a run's trace"): exactly the object
   * `agentvisor show RUN --json` prints, read the same way, whoever drives the run. Rejects with
   * `RunNotFoundError` for an unknown id, `StoreError` when the store cannot be read or a row of
   * the run is corrupt.
   *
   * @example
   * const trace = await av.trace(runId)
   * for (const step of trace.steps) console.log(step.step, step.text, step.toolCalls.map((c) => c.name))
   */
  trace(runId: string): Promise<RunTrace> {
    return unwrap(
      this.runtime,
      Effect.flatMap(StoreService, (store) => runTrace(store.db, runId))
    )
  }

  /**
   * Any run's events (docs/streaming.md), wherever it is driven: recorded ones from `fromSeq`, then
   * each new one until the run finishes. Text streams only from runs this process drives.
   *
   * @example
   * for await (const event of av.events(runId, { fromSeq: 12 })) console.log(JSON.stringify(event))
   */
  events(runId: string, options: EventsOptions = {}): AsyncIterable<RunStreamEvent> {
    return this.follow(runId, options, undefined)
  }

  private follow(runId: string, options: EventsOptions, stopWhen: (() => boolean) | undefined): AsyncIterable<RunStreamEvent> {
    const { runtime, hub } = this
    // The store's handle is had synchronously from the runtime: the reader subscribes as `events()` is called.
    const db = runtime.runSync(StoreService).db
    return { [Symbol.asyncIterator]: () => followEvents(db, runId, { ...options, hub, stopWhen }) }
  }

  private closed = false

  /**
   * Stops driving every run still going and closes the store. Those runs get no final
   * transition: like after a crash, they stay resumable under their ids. Closing twice is a no-op.
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.runtime.dispose()
    await Effect.runPromise(Scope.close(this.busScope, Exit.void))
  }

  private wrap(handle: RunHandle): StartedRun {
    // A run driven here is awaited through its fiber's observer: no fiber per waiting run.
    const result = handle.fiber !== undefined ? settled(handle.fiber) : unwrap(this.runtime, handle.result)
    // `close()` while a run goes on interrupts it (it stays resumable): that rejection belongs to
    // whoever awaits `result`, and must not surface as an unhandled one when nobody does.
    result.catch(() => {})
    // The closures keep what they use, not the whole handle (its `result` effect is no longer needed).
    const { runId, cancel } = handle
    let settledHere = false
    void result.then(
      () => (settledHere = true),
      () => (settledHere = true)
    )
    return {
      runId,
      result,
      cancel: () => unwrap(this.runtime, cancel),
      spawn: (child) => this.spawn(runId, child),
      send: (text) => this.send(runId, text),
      // A drive that paused ends the reading: nothing more happens here until the run is resumed.
      events: (options = {}) => this.follow(runId, options, () => settledHere)
    }
  }
}

/**
 * Runs an effect and rejects with its own typed error (a `RunNotFoundError`, a `StoreError`...)
 * rather than Effect's FiberFailure wrapper, so promise users can `instanceof` and read `_tag`.
 */
const unwrap = async <A, E>(
  runtime: ManagedRuntime.ManagedRuntime<Supervisor | StoreService, unknown>,
  effect: Effect.Effect<A, E, Supervisor | StoreService>
): Promise<A> => {
  const exit = await runtime.runPromiseExit(effect)
  if (Exit.isSuccess(exit)) return exit.value
  throw Cause.squash(exit.cause)
}

/** What `unwrap` of `Fiber.join(fiber)` gives, from an observer: the value, or the squashed cause. */
const settled = <A, E>(fiber: Fiber.RuntimeFiber<A, E>): Promise<A> =>
  new Promise((resolve, reject) =>
    fiber.addObserver((exit) => {
      if (Exit.isSuccess(exit)) resolve(exit.value)
      else reject(Cause.squash(exit.cause))
    })
  )
