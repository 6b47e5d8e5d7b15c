import { StoreError } from '../errors.js'
import { FIRST_LEASE_TOKEN, type RawRunWriter } from '../run-writer/run-writer.js'
import { isStoreOutage, isUniqueViolation } from './store-outage.js'

/** How long a driving process rides out a store outage when nobody says (docs/durability.md). */
export const DEFAULT_STORE_OUTAGE_MS = 60_000

/** How a process rides out a store outage: for how long, and where it says so. */
export interface StoreOutagePolicy {
  /** The longest outage ridden out, from its first failed call; 0: none, a failure interrupts at once. */
  readonly limitMs: number
  /** One line when the process starts waiting, one when the store is back, one when it gives up. */
  readonly log: (line: string) => void
}

/** The first wait, its growth, and the longest one (each jittered down by up to half). */
const FIRST_WAIT_MS = 100
const MAX_WAIT_MS = 5_000

/**
 * A `RawRunWriter` that rides out store outages (docs/durability.md, "A store outage"): a call
 * that fails for an outage (`isStoreOutage`) is made again, the same call with the same
 * arguments, after a capped, jittered exponential backoff, until it succeeds or the outage has
 * lasted `limitMs`; then it fails with a `StoreError` naming the outage, and the run is
 * interrupted, resumable, as for any store failure. Nothing else waits: a driver awaits its
 * commit before any effect (a provider call, a tool), so while a commit is retried nothing of
 * that run happens. Any other failure is the inner writer's, at once.
 *
 * The outage is the process's, not a call's: every call that fails while it lasts waits on the
 * same clock, so one line says the process waits and one says the store is back, however many
 * runs wait, and past the limit every call fails at once until a call succeeds again.
 *
 * A write whose connection dropped after it was sent may have landed. Every write of a driver
 * is one statement, its own transaction (postgres-run-writer.ts), fenced before it writes
 * anything, and each one inserts at least one keyed row (a journal entry, a receipt, a tool
 * journal entry, a run) or only sets values (which a second time sets again): so a retry that
 * meets a unique violation proves that its first try landed whole, under the same lease, and
 * is taken as done instead of applied twice.
 *
 * Only for writers whose calls answer later (PostgreSQL); SQLite's synchronous hot path has no
 * outage to ride out (store-outage.ts) and is never wrapped.
 */
export function rideOutStoreOutages(writer: RawRunWriter, policy: StoreOutagePolicy): RawOutageRidingWriter {
  /** When the current outage began (the first call that failed for it), or undefined. */
  let since: number | undefined
  let gaveUp = false
  /** Set once the process closes: a call still waiting fails at its next try instead. */
  let stopped = false
  const sleeping = new Set<() => void>()

  const back = (): void => {
    if (since === undefined) return
    policy.log(`the store answers again after ${seconds(Date.now() - since)}; the runs waiting for it go on`)
    since = undefined
    gaveUp = false
  }

  /**
   * `call` until it succeeds or the outage outlasts the limit. `landed`: what the call returns
   * when a retry proves an earlier try landed (a unique violation); undefined for a call that
   * proves nothing that way (a read, or a write whose retry cannot collide).
   */
  const retrying = async <A>(what: string, call: () => A | Promise<A>, landed?: () => A): Promise<A> => {
    let tries = 0
    let wait = FIRST_WAIT_MS
    for (;;) {
      try {
        const result = await call()
        back()
        return result
      } catch (error) {
        if (tries > 0 && landed !== undefined && isUniqueViolation(error)) {
          back()
          return landed()
        }
        if (!isStoreOutage(error)) throw error
        const now = Date.now()
        if (since === undefined) {
          since = now
          if (policy.limitMs > 0)
            policy.log(
              `the store is unreachable (${reason(error)}); waiting up to ${seconds(policy.limitMs)} for it to come back, retrying the same writes (nothing runs meanwhile)`
            )
        }
        const left = since + policy.limitMs - now
        if (left <= 0 || stopped) {
          if (!gaveUp && policy.limitMs > 0) policy.log(`the store is still unreachable after ${seconds(now - since)}; the runs waiting for it are interrupted`)
          gaveUp = true
          const why = stopped ? 'and this process is closing' : `for ${seconds(now - since)}`
          throw new StoreError({ message: `${what}: the store was unreachable ${why} (${reason(error)})`, cause: error })
        }
        tries += 1
        await sleep(Math.min(left, wait * (0.5 + Math.random() / 2)), sleeping)
        wait = Math.min(wait * 2, MAX_WAIT_MS)
      }
    }
  }

  const done = (): undefined => undefined
  const { refreshHead } = writer
  const stop = (): void => {
    stopped = true
    for (const wake of sleeping) wake()
  }
  return {
    stopWaiting: stop,
    commit: (commit, options) => retrying('commit transition', () => writer.commit(commit, options), done),
    ...(refreshHead !== undefined ? { refreshHead: (runId, token, head) => retrying('refresh the run row', () => refreshHead(runId, token, head)) } : {}),
    createRun: (row, lease, options) =>
      retrying(
        'create the run',
        () => writer.createRun(row, lease, options),
        () => FIRST_LEASE_TOKEN
      ),
    write: (runId, token, writes) => retrying('write', () => writer.write(runId, token, writes), done),
    approvals: (runId, step) => retrying('read approvals', () => writer.approvals(runId, step)),
    toolEffects: (runId, step) => retrying('read the tool journal', () => writer.toolEffects(runId, step)),
    loadRun: (runId) => retrying('load the run', () => writer.loadRun(runId)),
    acquireLease: (input) => retrying('take the lease', () => writer.acquireLease(input)),
    attemptTotals: (runId) => retrying('read the receipts', () => writer.attemptTotals(runId)),
    attemptRecorded: (runId, step, attempt) => retrying('read a receipt', () => writer.attemptRecorded(runId, step, attempt)),
    releaseLease: (runId, token, usageJson) => retrying('release the lease', () => writer.releaseLease(runId, token, usageJson)),
    settlePending: (runId, token, outcome, at) => retrying('settle pending receipts', () => writer.settlePending(runId, token, outcome, at)),
    rememberedRules: (workspace) => retrying('read remembered rules', () => writer.rememberedRules(workspace)),
    lastStepText: (runId) => retrying('read the last answer', () => writer.lastStepText(runId)),
    close: () => writer.close()
  }
}

/** The writer, and how a closing process stops its calls from waiting any longer. */
export interface RawOutageRidingWriter extends RawRunWriter {
  /** Calls waiting for the store fail at once (as past the limit): the process is closing. */
  readonly stopWaiting: () => void
}

/** Waits `ms`, or less when the process closes (`stopWaiting` wakes every sleeper). */
const sleep = (ms: number, sleeping: Set<() => void>): Promise<void> =>
  new Promise((resolve) => {
    const wake = (): void => {
      clearTimeout(timer)
      sleeping.delete(wake)
      resolve()
    }
    const timer = setTimeout(wake, ms)
    sleeping.add(wake)
  })

const seconds = (ms: number): string => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`

/** The failure in one line, without anything that could hold a secret (a URL's password). */
const reason = (error: unknown): string => {
  const text = (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? ''
  const masked = text.replace(/\/\/[^/@\s]*@/g, '//***@')
  return masked.length > 200 ? `${masked.slice(0, 197)}...` : masked
}
