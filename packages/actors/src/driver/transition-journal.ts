import type { JournalTransition, LeaseLostError, RunHead, RunWrite, RunWriter, StoreError } from '@agentvisor/store'
import { Effect, Exit } from 'effect'
import type { Actor, ActorScope } from 'xstate'
import type { RunContext, RunEvent, runMachine } from '../machine/run-machine.js'
import { isFinalPath, type RunStatePath, runStatePath, statusOfState } from '../machine/run-state.js'
import { encodeRunSnapshot, runScopeOf, runStep } from '../machine/run-snapshot.js'
import type { RunSnapshot } from '../machine/run-state.js'
import { iso, nowMs } from './now.js'
import { listens, notify, type RunObserver } from './run-observer.js'
import { stderrLog } from '../loop/survive.js'
import { RunRowRefresh } from './run-row-refresh.js'

/** A state's entry work result: the event to send, and the step data to commit with its transition. */
export interface Work {
  readonly event: RunEvent
  readonly writes?: ReadonlyArray<RunWrite>
  /** In-memory bookkeeping, done as the event is sent. */
  readonly after?: () => void
  /** What observers hear of the work (an attempt's settlement) once its transition is durable. */
  readonly notice?: () => void
}

/** Transitions and step data waiting for one commit. */
interface Staged {
  readonly transitions: JournalTransition[]
  readonly writes: RunWrite[]
  head: RunHead | undefined
  /** The machine's snapshot after the last transition (set with `head`): the entry persists it alone. */
  last: RunSnapshot | undefined
  /** What observers are told once the commit is durable, in the order it happened. */
  readonly notices: Array<() => void>
  /** When the last transition was staged (the drive's clock), set with `head`. */
  atMs: number
}

/** The option of a commit that may share a group transaction (one object for every commit). */
const BATCH = { batch: true } as const

const emptyStage = (): Staged => ({ transitions: [], writes: [], head: undefined, last: undefined, notices: [], atMs: 0 })

/** Where the store has the run: what a drive stopped by a failing store reports (docs/durability.md). */
export interface DurableHead {
  readonly state: string
  readonly steps: number
}

/**
 * What the driver sends when the machine ignores an event of the entry work: every transition
 * of the machine targets a state, so an ignored event means the driver and the machine disagree
 * (a bug). Dropping it would re-enter the same state's work, in `dispatching` a second paid
 * model call; the run stops instead, naming both (docs/architecture.md).
 */
const ignored = (state: string, event: RunEvent['type']): Work => ({
  event: {
    type: 'FAIL',
    error: { kind: 'internal', message: `the run machine ignores the event ${event} in state ${state}; the run stops rather than repeat that state's work` }
  }
})

/**
 * The run's transition journal: the machine actor, the transitions' seq, the batch staged for
 * the next commit, the durable head, and when observers hear. Every event the driver sends goes
 * through `stage` or `commit`, so these rules live here only:
 *
 * - Staging: transitions whose next state's entry work is pure (the entry-work table says which)
 *   are staged and committed together with the next one, in one transaction: the store gets
 *   them as one journal entry with the snapshot after the last (docs/durability.md, "The
 *   journal"), and nothing with an effect (a provider call, a tool, a wait) ever starts before
 *   everything staged is durable (the loop flushes first).
 * - Observers hear of a transition, and of whatever `whenDurable` queued behind it, only once the
 *   commit holding it is durable, in the order it happened.
 * - Fencing: every commit and write carries the lease token; a superseded driver writes nothing.
 * - An ignored event stops the run (see `ignored`).
 */
export class TransitionJournal {
  /** The last transition's seq, staged or durable. */
  seq: number
  private durableSeq: number
  private staged: Staged = emptyStage()
  /** Where the store has the run (see `DurableHead`). */
  durable: DurableHead
  /** The status this driver last made durable (unknown at first: the row may say otherwise). */
  private writtenStatus: string | undefined
  /** The machine's snapshot after the last transition, staged or durable, and its state path. */
  private snapshot: RunSnapshot
  private at: RunStatePath
  /** The scope the machine is stepped under (machine/run-snapshot.ts); undefined: the actor is sent every event. */
  private readonly scope: ActorScope<RunSnapshot, RunEvent> | undefined
  /**
   * Makes everything staged durable in one fenced transaction, then tells the observers.
   * Uninterruptible (see `flushNow`), so a cancel that lands mid-commit waits: memory and store agree.
   */
  readonly flush: Effect.Effect<void, StoreError | LeaseLostError>

  /** The run's row when a commit leaves it for later (run-row-refresh.ts). */
  private readonly row: RunRowRefresh

  constructor(
    private readonly writer: RunWriter,
    private readonly runId: string,
    private readonly leaseToken: number,
    readonly actor: Actor<typeof runMachine>,
    private readonly observers: ReadonlyArray<RunObserver>,
    seq: number,
    private readonly concurrentRuns: (() => number) | undefined,
    warn: (line: string) => void = stderrLog
  ) {
    this.row = new RunRowRefresh(writer, runId, leaseToken, warn)
    this.seq = seq
    this.durableSeq = seq
    this.snapshot = actor.getSnapshot()
    this.at = runStatePath(this.snapshot.value)
    this.scope = runScopeOf(actor)
    this.durable = { state: this.at, steps: this.snapshot.context.completedSteps }
    this.flush = Effect.suspend(() => this.flushNow() ?? Effect.void)
  }

  context(): RunContext {
    return this.snapshot.context
  }

  path(): RunStatePath {
    return this.at
  }

  /**
   * Sends the event and stages its transition with the work's writes. An event the machine
   * ignores in a live state stages a `FAIL` instead; in a finished state (which ignores every
   * event, run-machine.ts) it changes nothing: the run has already ended.
   */
  stage(work: Work, atMs: number): void {
    const before = this.snapshot
    const after = this.scope === undefined ? this.sent(work.event) : runStep(before, work.event, this.scope)
    const from = this.at
    // An ignored event leaves the very same snapshot (every transition of the machine targets a
    // state, so a taken one never does): one pass through the machine instead of `can` and `send`.
    if (after === before) {
      if (isFinalPath(from)) return
      if (work.event.type === 'FAIL') throw new Error(`the run machine ignores FAIL in state ${from}`)
      this.stage(ignored(from, work.event.type), atMs)
      return
    }
    const to = runStatePath(after.value)
    this.snapshot = after
    this.at = to
    const at = iso(atMs)
    const ctx = after.context
    const staged = this.staged
    this.seq += 1
    const seq = this.seq
    if (work.writes !== undefined) staged.writes.push(...work.writes)
    // The event whole, and no snapshot: the entry's one snapshot is the last one's, and the
    // machine replays the others from the events (time travel).
    staged.transitions.push({ seq, from, event: work.event, to, at })
    staged.last = after
    staged.atMs = atMs
    if (work.notice !== undefined) staged.notices.push(work.notice)
    // Asked at each transition, not once: an observer may start or stop listening while the run
    // goes on (an events() reader, docs/streaming.md). No payload is built for nobody.
    if (listens(this.observers, 'onTransition')) {
      const observers = this.observers
      const transition = { runId: this.runId, seq, from, event: work.event.type, to, at }
      staged.notices.push(() => notify(observers, 'onTransition', transition))
    }
    const status = statusOfState(to)
    const steps = ctx.completedSteps
    const errorJson = ctx.error === null ? null : JSON.stringify(ctx.error)
    const endedAt = isFinalPath(to) ? at : null
    // The status is written only when it changes: it is indexed, and rewriting an indexed column
    // costs an index update at every commit (the first commit of a drive always writes it).
    staged.head =
      status === this.writtenStatus
        ? { state: to, steps, updated_at: at, error_json: errorJson, ended_at: endedAt }
        : { status, state: to, steps, updated_at: at, error_json: errorJson, ended_at: endedAt }
    // In-memory bookkeeping (the conversation) moves on now; a failed flush ends the drive.
    work.after?.()
  }

  /** The actor's snapshot after it is sent `event` (an actor the Stately inspector watches). */
  private sent(event: RunEvent): RunSnapshot {
    this.actor.send(event)
    return this.actor.getSnapshot()
  }

  /** Adds step data to the next commit without a transition (the receipt before a dispatch). */
  stageWrite(write: RunWrite): void {
    this.staged.writes.push(write)
  }

  /**
   * Sends the event and persists its transition (and anything staged before it) in one
   * transaction. Uninterruptible: a cancel that lands mid-commit waits, so memory and store
   * never disagree.
   */
  commit(work: Work): Effect.Effect<void, StoreError | LeaseLostError> {
    return Effect.uninterruptible(Effect.flatMap(nowMs, (at) => (this.stage(work, at), this.flush)))
  }

  /**
   * Tells observers now, or, while transitions are staged, once they are durable: events reach
   * observers in the order they happened, and never before the transitions they follow.
   */
  whenDurable(notice: () => void): void {
    if (this.staged.transitions.length > 0) this.staged.notices.push(notice)
    else notice()
  }

  /** Writes outside a transition (an attempt row, a journal entry), fenced like a transition. */
  write(write: RunWrite): Effect.Effect<void, StoreError | LeaseLostError> {
    return this.writer.write(this.runId, this.leaseToken, [write])
  }

  /**
   * Makes everything staged durable now: `undefined` once it is (SQLite answers at once, and the
   * observers have heard), else the Effect that finishes the commit (a store that answers later,
   * a group commit, a failure), uninterruptible like every flush. The hot path's flush: no Effect
   * when the store needs none.
   */
  flushNow(): Effect.Effect<void, StoreError | LeaseLostError> | undefined {
    const batch = this.staged
    if (batch.transitions.length === 0 && batch.writes.length === 0) return undefined
    this.staged = emptyStage()
    const { writer, runId, leaseToken } = this
    const { head } = batch
    const deferred = head !== undefined && this.row.defers(head, batch.atMs)
    // Alone, a run commits at once; among others, its commit may share their transaction. A
    // run's first receipt (no transition yet) is written at once: waiting for the group there
    // kept ~1 KB more of every idle run's memory, for a write a run makes once.
    const made = (
      head === undefined
        ? writer.write(runId, leaseToken, batch.writes)
        : writer.commit(
            {
              runId,
              leaseToken,
              writes: batch.writes,
              transitions: batch.transitions,
              snapshot: encodeRunSnapshot(batch.last!),
              head,
              headDeferred: deferred
            },
            (this.concurrentRuns?.() ?? 1) > 1 ? BATCH : undefined
          )
    ).now()
    if (!Exit.isExit(made)) return this.durableLater(made, batch, deferred)
    if (Exit.isFailure(made)) return this.failed(made)
    this.durableNow(batch, deferred)
    return undefined
  }

  /**
   * A commit the store answers later (a group commit, an async store), uninterruptible like every
   * flush. One match for the wait: a group commit is every step of every run when many run at
   * once, and each wrapper is one more Effect step per step.
   */
  private durableLater(
    made: Effect.Effect<void, StoreError | LeaseLostError>,
    batch: Staged,
    deferred: boolean
  ): Effect.Effect<void, StoreError | LeaseLostError> {
    this.row.started()
    return Effect.uninterruptible(
      Effect.matchEffect(made, {
        onSuccess: () => {
          this.row.settled()
          this.durableNow(batch, deferred)
          return Effect.void
        },
        onFailure: (error) => {
          this.row.settled()
          return this.failed(Effect.fail(error))
        }
      })
    )
  }

  /** The drive is over: a run's row left for later is written now (run-row-refresh.ts). */
  endRefresh(): void {
    this.row.end()
  }

  /** A commit failed: nothing staged since the last durable one counts, and the drive ends with `failure`. */
  private failed<A>(failure: Effect.Effect<A, StoreError | LeaseLostError>): Effect.Effect<A, StoreError | LeaseLostError> {
    this.seq = this.durableSeq
    return failure
  }

  private durableNow(batch: Staged, deferred: boolean): void {
    this.durableSeq = this.seq
    const { head } = batch
    if (head !== undefined) {
      this.durable = { state: head.state, steps: head.steps }
      if (head.status !== undefined) this.writtenStatus = head.status
      this.row.durable(head, batch.atMs, deferred)
    }
    for (const notice of batch.notices) notice()
  }
}
