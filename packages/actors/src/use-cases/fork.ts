import {
  type Database,
  getRun,
  insertFork,
  newRunId,
  type JournalTransition,
  listJournalEntries,
  type NewJournalEntry,
  type StoreError
} from '@agentvisor/store'
import { Effect, Either } from 'effect'
import type { Kysely } from 'kysely'
import { ForkRefusedError, RunNotFoundError } from '../errors.js'
import { machineInput } from '../machine/run-machine.js'
import { encodeRunSnapshot, restoreRunSnapshot } from '../machine/run-snapshot.js'
import { statusOfState } from '../machine/run-state.js'
import { replayJournal } from '../trace/run-snapshots.js'

/** A fork made: its id, and where it came from. */
export interface ForkOutcome {
  readonly runId: string
  readonly forkedFrom: { readonly runId: string; readonly seq: number }
}

/** States a fork may start in: a run that had ended, or waited for children it does not own, may not. */
const unforkable = (state: string): string | undefined => {
  if (state.startsWith('finished')) return `the run had ended then (${state}): continue it with agentvisor send instead`
  if (state === 'awaitingChildren') return 'the run waited for its children then: fork at a seq before they were spawned, or after they ended'
  return undefined
}

/**
 * Forks a run from its state after transition `seq` (docs/cli.md, `fork`; docs/inspector.md):
 * a new root run, its own id, recording where it came from, whose journal is the original's up to
 * `seq` and whose conversation is the steps answered by then (a step's results once its tools
 * were done). Requests made by then are copied (pending if decided later: the fork asks again);
 * the receipts of a step in flight, tool effects and children are not. Its timeout counts from
 * now. The workspace is the original's as it is now: files are not rewound. The original is not
 * touched. The fork is left for its caller to drive, like a run a crash interrupted.
 */
export const forkRun = (db: Kysely<Database>, runId: string, seq: number): Effect.Effect<ForkOutcome, RunNotFoundError | ForkRefusedError | StoreError> =>
  Effect.gen(function* () {
    const refuse = (reason: string) => Effect.fail(new ForkRefusedError({ runId, seq, reason }))
    const run = yield* getRun(db, runId)
    if (run === undefined) return yield* new RunNotFoundError({ runId })
    const entries = yield* listJournalEntries(db, runId)
    const last = entries.at(-1)?.seq ?? 0
    if (!Number.isInteger(seq) || seq < 1 || seq > last) return yield* refuse(last === 0 ? 'it has no transition yet' : `the seq must be 1 to ${last}`)
    const transitions = entries.flatMap((entry) => JSON.parse(entry.transitions_json) as JournalTransition[])
    const at = transitions.find((t) => t.seq === seq)
    if (at === undefined) return yield* refuse('its journal does not hold that seq')
    const why = unforkable(at.to)
    if (why !== undefined) return yield* refuse(why)

    // A fork is a root: the tree the original belonged to is not its tree.
    const { lineage: _lineage, ...contract } = run.contract
    const input = machineInput(contract)
    const snapshot = replayJournal(entries, input)[seq - 1]?.snapshot ?? Either.left('cannot be found')
    if (Either.isLeft(snapshot)) return yield* refuse(`its snapshot then ${snapshot.left}`)
    const now = Date.now()
    const persisted = snapshot.right
    // A turn's timeout counts from the turn's start: the fork's from now, like a new run's.
    const context = persisted.context.turnAt === undefined || persisted.context.turnAt === null ? persisted.context : { ...persisted.context, turnAt: now }
    const encoded = yield* Effect.try({
      try: () => encodeRunSnapshot(restoreRunSnapshot({ ...persisted, context }, input)),
      catch: () => new ForkRefusedError({ runId, seq, reason: 'its snapshot then does not fit the run machine' })
    })

    const forkId = newRunId()
    const kept = entries.filter((entry) => entry.first_seq <= seq)
    const journal: NewJournalEntry[] = kept.map((entry, i) => {
      const isLast = i === kept.length - 1
      if (!isLast)
        return { run_id: forkId, seq: entry.seq, first_seq: entry.first_seq, transitions_json: entry.transitions_json, snapshot_json: entry.snapshot_json }
      const upTo = (JSON.parse(entry.transitions_json) as JournalTransition[]).filter((t) => t.seq <= seq)
      return { run_id: forkId, seq, first_seq: entry.first_seq, transitions_json: JSON.stringify(upTo), snapshot_json: encoded }
    })
    yield* insertFork(db, {
      from: runId,
      to: forkId,
      seq,
      at: at.at,
      now: new Date(now).toISOString(),
      goal: run.goal,
      status: statusOfState(at.to),
      state: at.to,
      contractJson: JSON.stringify(contract),
      entries: journal,
      answered: context.completedSteps,
      toolsPending: /^(acting|awaitingApproval|awaitingInput)/.test(at.to),
      feedbackGiven: /^(dispatching|retrying|fallingOver)/.test(at.to)
    })
    return { runId: forkId, forkedFrom: { runId, seq } }
  })
