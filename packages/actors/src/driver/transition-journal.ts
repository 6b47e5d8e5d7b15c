import type { Eventually, JournalTransition, LeaseLostError, RunHead, RunWrite, RunWriter, StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Actor } from 'xstate'
import type { RunContext, RunEvent, runMachine } from '../machine/run-machine.js'
import { isFinalPath, type RunStatePath, runStatePath, statusOfState } from '../machine/run-state.js'
import { encodeRunSnapshot, type RunSnapshot, type RunStep, runStepOf } from '../machine/run-snapshot.js'
import { failure, iso, nowMs, store } from '../supervisor/driver-io.js'
import { listens, notify, type RunObserver } from '../supervisor/run-observer.js'
import { stderrLog } from '../loop/survive.js'

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

/**
 * How long the run's row may lag its journal (docs/durability.md, "The run's row"): a commit
 * that changes no status leaves the row's `state`, `steps` and `updated_at` alone when they were
 * written less than this ago (the writer fences with a read instead), and a timer writes them
 * this long after such a commit if nothing has since. A status change is always written at once.
 */
export const HEAD_REFRESH_MS = 50

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
  /** How an event moves the machine (machine/run-snapshot.ts, `runStepOf`). */
  private readonly next: RunStep
  /**
   * Makes everything staged durable in one fenced transaction, then tells the observers.
   * Uninterruptible (see `flushNow`), so a cancel that lands mid-commit waits: memory and store agree.
   */
  readonly flush: Effect.Effect<void, StoreError | LeaseLostError>

  /** Whether any observer has `onTransition` (no payload is built for nobody). */
  private readonly hearsTransitions: boolean

  /** The drive-clock time of the last durable commit that wrote the run's row. */
  private headWrittenAtMs = Number.NEGATIVE_INFINITY
  /** The head of the last durable commit when it was left for later (see HEAD_REFRESH_MS), else undefined. */
  private staleHead: { readonly head: RunHead; readonly atMs: number } | undefined
  private refreshTimer: ReturnType<typeof setTimeout> | undefined
  /** Commits handed to the writer and not yet settled: the timer never writes an older head past them. */
  private inFlight = 0
  /** Set once the drive is over (`endRefresh`). */
  private ended = false

  constructor(
    private readonly writer: RunWriter,
    private readonly runId: string,
    private readonly leaseToken: number,
    readonly actor: Actor<typeof runMachine>,
    private readonly observers: ReadonlyArray<RunObserver>,
    seq: number,
    private readonly concurrentRuns: (() => number) | undefined,
    private readonly warn: (line: string) => void = stderrLog
  ) {
    this.seq = seq
    this.durableSeq = seq
    this.hearsTransitions = listens(observers, 'onTransition')
    this.snapshot = actor.getSnapshot()
    this.at = runStatePath(this.snapshot.value)
    this.next =
      runStepOf(actor) ??
      ((_, event) => {
        actor.send(event)
        return actor.getSnapshot()
      })
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
    const after = this.next(before, work.event)
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
    if (this.hearsTransitions) {
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
  write(what: string, write: RunWrite): Effect.Effect<void, StoreError | LeaseLostError> {
    return store(what, () => this.writer.write(this.runId, this.leaseToken, [write]))
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
    const deferred = head !== undefined && this.defers(head, batch.atMs)
    let result: Eventually<void>
    try {
      // Alone, a run commits at once; among others, its commit may share their transaction. A
      // run's first receipt (no transition yet) is written at once: waiting for the group there
      // kept ~1 KB more of every idle run's memory, for a write a run makes once.
      result =
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
    } catch (cause) {
      return this.failed(failure('commit transition', cause))
    }
    if (!(result instanceof Promise)) {
      this.durableNow(batch, deferred)
      return undefined
    }
    // One `async` for the wait, not `tryPromise` matched: a group commit is every step of every
    // run when many run at once, and each wrapper is one more Effect step per step.
    const pending = result
    this.inFlight += 1
    return Effect.uninterruptible(
      Effect.async<void, StoreError | LeaseLostError>((resume) => {
        pending.then(
          () => {
            this.inFlight -= 1
            resume(Effect.sync(() => this.durableNow(batch, deferred)))
          },
          (cause: unknown) => {
            this.inFlight -= 1
            resume(Effect.suspend(() => this.failed(failure('commit transition', cause))))
          }
        )
      })
    )
  }

  /**
   * Whether this commit may leave the run's row for later: the writer can, the status, error and
   * end do not change, and the row was written less than HEAD_REFRESH_MS ago.
   */
  private defers(head: RunHead, atMs: number): boolean {
    return (
      this.writer.refreshHead !== undefined &&
      head.status === undefined &&
      head.error_json === null &&
      head.ended_at === null &&
      atMs - this.headWrittenAtMs < HEAD_REFRESH_MS
    )
  }

  /** Writes the head a commit left for later, HEAD_REFRESH_MS after it, unless a commit has since. */
  private armRefresh(): void {
    // After the drive (a commit that was on its way when it ended): written now, no timer left behind.
    if (this.ended) {
      this.refreshHead()
      return
    }
    if (this.refreshTimer !== undefined) return
    this.refreshTimer = setTimeout(() => this.refreshHead(), HEAD_REFRESH_MS)
    // A pending refresh never keeps a process alive: the journal holds the run either way.
    this.refreshTimer.unref?.()
  }

  private refreshHead(): void {
    this.refreshTimer = undefined
    const stale = this.staleHead
    if (stale === undefined) return
    // A commit still on its way may carry a newer head (or a status): it goes first.
    if (this.inFlight > 0) {
      this.armRefresh()
      return
    }
    this.staleHead = undefined
    this.headWrittenAtMs = stale.atMs
    const { state, steps, updated_at } = stale.head
    const failed = (cause: unknown): void => {
      // A superseded driver's refresh writes nothing, rightly; its run's next commit finds out.
      if ((cause as { _tag?: unknown } | null)?._tag === 'LeaseLostError') return
      this.warn(`run ${this.runId}: the run's row was not refreshed (${failure('refresh run head', cause).message}); its next commit writes it`)
    }
    try {
      const result = this.writer.refreshHead?.(this.runId, this.leaseToken, { state, steps, updated_at, error_json: null, ended_at: null })
      if (result instanceof Promise) result.catch(failed)
    } catch (cause) {
      failed(cause)
    }
  }

  /**
   * The drive is over: a head left for later is written now (a commit still on its way wrote a
   * newer one, or failed and ended the drive), and no timer stays behind.
   */
  endRefresh(): void {
    this.ended = true
    if (this.refreshTimer !== undefined) clearTimeout(this.refreshTimer)
    this.refreshTimer = undefined
    if (this.inFlight > 0) this.staleHead = undefined
    this.refreshHead()
  }

  private failed(error: StoreError | LeaseLostError): Effect.Effect<never, StoreError | LeaseLostError> {
    this.seq = this.durableSeq
    return Effect.fail(error)
  }

  private durableNow(batch: Staged, deferred: boolean): void {
    this.durableSeq = this.seq
    const { head } = batch
    if (head !== undefined) {
      this.durable = { state: head.state, steps: head.steps }
      if (head.status !== undefined) this.writtenStatus = head.status
      if (deferred) {
        this.staleHead = { head, atMs: batch.atMs }
        this.armRefresh()
      } else {
        this.headWrittenAtMs = batch.atMs
        this.staleHead = undefined
      }
    }
    for (const notice of batch.notices) notice()
  }
}
