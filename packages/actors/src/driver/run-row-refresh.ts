import type { LeaseLostError, RunHead, RunWriter, StoreError } from '@agentvisor/store'
import { Effect } from 'effect'

/**
 * How long the run's row may lag its journal (docs/durability.md, "The run's row"): a commit
 * that changes no status leaves the row's `state`, `steps` and `updated_at` alone when they were
 * written less than this ago (the writer fences with a read instead), and a timer writes them
 * this long after such a commit if nothing has since. A status change is always written at once.
 */
export const HEAD_REFRESH_MS = 50

/**
 * The run's row of one drive, when the journal leaves it for later: which commit may defer it,
 * the head a deferring commit left, the timer that writes it, and the drive's end, which writes
 * it at once. The journal (transition-journal.ts) asks `defers` before a commit and reports what
 * became of it; the rules of the lag live here only.
 */
export class RunRowRefresh {
  /** The drive-clock time of the last durable commit that wrote the run's row. */
  private writtenAtMs = Number.NEGATIVE_INFINITY
  /** The head of the last durable commit when it was left for later, else undefined. */
  private stale: { readonly head: RunHead; readonly atMs: number } | undefined
  private timer: ReturnType<typeof setTimeout> | undefined
  /** Commits handed to the writer and not yet settled: the timer never writes an older head past them. */
  private inFlight = 0
  /** Set once the drive is over (`end`). */
  private ended = false

  constructor(
    private readonly writer: RunWriter,
    private readonly runId: string,
    private readonly leaseToken: number,
    private readonly warn: (line: string) => void
  ) {}

  /**
   * Whether a commit of `head` at `atMs` may leave the run's row for later: the writer can, the
   * status, error and end do not change, and the row was written less than HEAD_REFRESH_MS ago.
   */
  defers(head: RunHead, atMs: number): boolean {
    return (
      this.writer.refreshHead !== undefined &&
      head.status === undefined &&
      head.error_json === null &&
      head.ended_at === null &&
      atMs - this.writtenAtMs < HEAD_REFRESH_MS
    )
  }

  /** A commit is on its way to the store (a group commit, an async store). */
  started(): void {
    this.inFlight += 1
  }

  /** A commit on its way has settled, durable or not. */
  settled(): void {
    this.inFlight -= 1
  }

  /** A commit of `head`, staged at `atMs`, is durable: with the row written, or left for later. */
  durable(head: RunHead, atMs: number, deferred: boolean): void {
    if (deferred) {
      this.stale = { head, atMs }
      this.arm()
    } else {
      this.writtenAtMs = atMs
      this.stale = undefined
    }
  }

  /**
   * The drive is over: a head left for later is written now (a commit still on its way wrote a
   * newer one, or failed and ended the drive), and no timer stays behind.
   */
  end(): void {
    this.ended = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    if (this.inFlight > 0) this.stale = undefined
    this.write()
  }

  /** Writes the head a commit left for later, HEAD_REFRESH_MS after it, unless a commit has since. */
  private arm(): void {
    // After the drive (a commit that was on its way when it ended): written now, no timer left behind.
    if (this.ended) {
      this.write()
      return
    }
    if (this.timer !== undefined) return
    this.timer = setTimeout(() => this.write(), HEAD_REFRESH_MS)
    // A pending refresh never keeps a process alive: the journal holds the run either way.
    this.timer.unref?.()
  }

  private write(): void {
    this.timer = undefined
    const stale = this.stale
    if (stale === undefined) return
    // A commit still on its way may carry a newer head (or a status): it goes first.
    if (this.inFlight > 0) {
      this.arm()
      return
    }
    this.stale = undefined
    this.writtenAtMs = stale.atMs
    const { state, steps, updated_at } = stale.head
    const refresh = this.writer.refreshHead?.(this.runId, this.leaseToken, { state, steps, updated_at, error_json: null, ended_at: null })
    if (refresh === undefined) return
    Effect.runFork(Effect.catchAll(refresh, (error) => Effect.sync(() => this.failed(error))))
  }

  private failed(error: StoreError | LeaseLostError): void {
    // A superseded driver's refresh writes nothing, rightly; its run's next commit finds out.
    if (error._tag === 'LeaseLostError') return
    this.warn(`run ${this.runId}: the run's row was not refreshed (${error.message}); its next commit writes it`)
  }
}
