import type { RunObserver, TextDelta, TransitionRecord } from '../driver/run-observer.js'

/** One reader of a run's events in this process: woken when the run moves, handed its text as it streams. */
export interface EventListener {
  /** Something of the run became durable, or its driver let go: read the store again. */
  readonly wake: () => void
  readonly text: (delta: TextDelta) => void
}

/**
 * The run observer behind `events()` in this process (docs/streaming.md). It hands the pieces of
 * text a model streams to the run's readers, keeps those of each run's latest call so that a
 * reader who joins mid-call gets it from its first piece, and tells readers when to read the
 * store again. Its hooks exist only while somebody reads: a process nobody watches pays nothing
 * per transition or per call (the driver asks at each one; a call's text is relayed only when
 * someone listens as it starts, which measured ~5% of a `list_dir` step otherwise).
 */
export class EventHub implements RunObserver {
  private readonly readers = new Map<string, Set<EventListener>>()
  /** Per run, the pieces of its latest call's text (replaced when the next call streams). */
  private readonly latest = new Map<string, TextDelta[]>()
  /** Runs being started here right now: their first call may stream before anyone can subscribe. */
  private starting = 0

  get onTransition(): ((transition: TransitionRecord) => void) | undefined {
    return this.readers.size === 0 ? undefined : this.transition
  }

  get onText(): ((delta: TextDelta) => void) | undefined {
    return this.readers.size === 0 && this.starting === 0 ? undefined : this.text
  }

  /**
   * Listens for text while a run is being started (`Agentvisor.start`, `resume`, `send`): a run's
   * first call can begin before `start` returns, and its pieces are kept for the reader who
   * subscribes right after. Returns how to stop.
   */
  starts(): () => void {
    this.starting++
    let done = false
    return () => {
      if (!done) this.starting--
      done = true
    }
  }

  private readonly text = (delta: TextDelta): void => {
    let pieces = this.latest.get(delta.runId)
    const first = pieces?.[0]
    if (pieces === undefined || first === undefined || first.step !== delta.step || first.attempt !== delta.attempt) {
      pieces = []
      this.latest.set(delta.runId, pieces)
    }
    pieces.push(delta)
    for (const listener of this.readers.get(delta.runId) ?? []) listener.text(delta)
  }

  readonly onDriveEnded = ({ runId }: { runId: string }): void => {
    this.latest.delete(runId)
    for (const listener of this.readers.get(runId) ?? []) listener.wake()
  }

  /** Starts handing `runId`'s news to `listener`, the latest call's text so far first; returns how to stop. */
  subscribe(runId: string, listener: EventListener): () => void {
    let set = this.readers.get(runId)
    if (set === undefined) {
      set = new Set()
      this.readers.set(runId, set)
    }
    set.add(listener)
    for (const delta of this.latest.get(runId) ?? []) listener.text(delta)
    return () => {
      set.delete(listener)
      if (set.size === 0 && this.readers.get(runId) === set) this.readers.delete(runId)
    }
  }

  private readonly transition = (transition: TransitionRecord): void => {
    for (const listener of this.readers.get(transition.runId) ?? []) listener.wake()
  }
}
