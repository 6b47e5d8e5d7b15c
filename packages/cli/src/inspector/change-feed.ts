import { isInterrupted, type Store } from '@agentvisor/store'

/** Tells listeners which runs changed in the store, whichever process changed them. */
export interface ChangeFeed {
  /** Starts polling with the first listener; returns the function that removes it. */
  subscribe(listener: (runIds: ReadonlyArray<string>) => void): () => void
  /** Reports a change this process made itself, without waiting for the next poll. */
  notify(runIds: ReadonlyArray<string>): void
  close(): void
}

/**
 * How far back each poll looks. A writer stamps `updated_at` before its transaction commits, so
 * a row can become visible with a stamp older than one already seen from a faster writer; rows
 * inside the window are compared by their stamp, so such a late commit is still reported.
 */
const LOOKBACK_MS = 5_000

/**
 * Remembers the stamp of every row seen inside the look-back window, so each poll reports only
 * rows that are new or whose stamp moved.
 */
interface Watermark {
  /** The stamp from which the next poll reads: the newest seen, less the look-back window. */
  since(): string
  /** Returns the run ids of rows not seen with this stamp before. */
  take(rows: ReadonlyArray<{ key: string; runId: string; at: string }>): string[]
}

const makeWatermark = (): Watermark => {
  const seen = new Map<string, string>()
  let newest = ''
  return {
    since: (): string => (newest === '' ? '' : new Date(Date.parse(newest) - LOOKBACK_MS).toISOString()),
    take(rows: ReadonlyArray<{ key: string; runId: string; at: string }>): string[] {
      const changed: string[] = []
      for (const row of rows) {
        if (seen.get(row.key) === row.at) continue
        seen.set(row.key, row.at)
        changed.push(row.runId)
        if (row.at > newest) newest = row.at
      }
      const cutoff = this.since()
      for (const [key, at] of seen) if (at < cutoff) seen.delete(key)
      return changed
    }
  }
}

/**
 * Polls the store for runs that moved (a transition stamps the run row), approvals that were
 * decided (possibly by `agentvisor approve` in another process, which does not touch the run
 * row), and running runs that became interrupted or stopped being so (their driver died, or one
 * took them again). The first two read only rows stamped inside the look-back window; the third
 * the running runs.
 *
 * The queries live here rather than in the store's repositories because they exist only for the
 * inspector's polling and read two columns each.
 */
export const makeChangeFeed = (db: Store['db'], pollMs: number): ChangeFeed => {
  const listeners = new Set<(runIds: ReadonlyArray<string>) => void>()
  const runs = makeWatermark()
  const decisions = makeWatermark()
  // Runs seen interrupted (running, their driver gone): a driver killed with SIGKILL writes
  // nothing, so the change is seen here, when its lease expires or its process is found dead.
  let interrupted = new Set<string>()
  let timer: NodeJS.Timeout | undefined
  let primed = false
  let polling = false
  let closed = false

  const emit = (runIds: ReadonlyArray<string>): void => {
    const unique = [...new Set(runIds)]
    if (unique.length === 0) return
    for (const listener of listeners) listener(unique)
  }

  const poll = async (): Promise<void> => {
    if (polling || closed) return
    polling = true
    try {
      const [runRows, decisionRows, runningRows] = await Promise.all([
        db.selectFrom('runs').select(['id', 'updated_at']).where('updated_at', '>=', runs.since()).execute(),
        db
          .selectFrom('approvals')
          .select(['id', 'run_id', 'decided_at'])
          .where('decided_at', 'is not', null)
          .where('decided_at', '>=', decisions.since())
          .execute(),
        db.selectFrom('runs').select(['id', 'status', 'lease_owner', 'lease_expires_at']).where('status', '=', 'running').execute()
      ])
      const now = Date.now()
      const nowInterrupted = new Set(runningRows.filter((row) => isInterrupted(row, now)).map((row) => row.id))
      const flipped = [...[...nowInterrupted].filter((id) => !interrupted.has(id)), ...[...interrupted].filter((id) => !nowInterrupted.has(id))]
      interrupted = nowInterrupted
      const changed = [
        ...runs.take(runRows.map((r) => ({ key: r.id, runId: r.id, at: r.updated_at }))),
        ...decisions.take(decisionRows.map((r) => ({ key: r.id, runId: r.run_id, at: r.decided_at ?? '' }))),
        ...flipped
      ]
      // The first poll only learns what is there: a page that just connected fetches it anyway.
      if (primed) emit(changed)
      primed = true
    } catch {
      // A poll that fails (the store busy, or closing) is simply tried again at the next tick.
    } finally {
      polling = false
    }
  }

  const start = (): void => {
    if (timer !== undefined || closed) return
    void poll()
    timer = setInterval(() => void poll(), pollMs)
  }
  const stop = (): void => {
    if (timer !== undefined) clearInterval(timer)
    timer = undefined
  }

  return {
    subscribe(listener) {
      listeners.add(listener)
      start()
      return () => {
        listeners.delete(listener)
        if (listeners.size === 0) stop()
      }
    },
    notify: emit,
    close() {
      closed = true
      stop()
      listeners.clear()
    }
  }
}
