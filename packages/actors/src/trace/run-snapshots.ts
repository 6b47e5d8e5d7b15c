import { jsonTextTooDeep, MAX_NESTING_DEPTH } from '@agentvisor/core'
import { type Executor, getRun, getRunRow, type JournalEntryRow, type JournalTransition, listJournalEntries, type StoreError } from '@agentvisor/store'
import { Effect, Either } from 'effect'
import { machineInput, type RunEvent, type RunMachineInput } from '../machine/run-machine.js'
import {
  decodeRunSnapshot,
  initialRunSnapshot,
  nextRunSnapshot,
  persistRunSnapshot,
  type PersistedRunSnapshot,
  restoreRunSnapshot
} from '../machine/run-snapshot.js'
import type { RunSnapshot } from '../machine/run-state.js'

/** The machine after one transition of a run: what time travel shows (docs/inspector.md). */
export interface SnapshotAt {
  readonly seq: number
  /**
   * The machine's persisted snapshot after it, or why it cannot be had (completing "its
   * snapshot ..."): its entry's snapshot is unreadable or of a schema version this code does not
   * read (docs/durability.md, "The journal").
   */
  readonly snapshot: Either.Either<PersistedRunSnapshot, string>
}

/**
 * Entries nest a run's context a few levels down; one deeper than this holds something past the
 * input limits (a row stored before them) that would overflow the stack of whatever serialises
 * it, so it is not read.
 */
const MAX_ENTRY_DEPTH = 4 * MAX_NESTING_DEPTH

/**
 * The machine's snapshot after every transition of a run, one per seq in seq order; undefined
 * when there is no such run. The journal stores one snapshot per entry (a commit), after its last
 * transition (docs/durability.md, "The journal"): the snapshot after an earlier one is the
 * previous entry's snapshot (or the machine's first, for the run's first entry) with the entry's
 * events replayed through the pure machine, exactly what the driver's actor did when it took them.
 */
export const loadRunSnapshots = (db: Executor, runId: string): Effect.Effect<ReadonlyArray<SnapshotAt> | undefined, StoreError> =>
  Effect.gen(function* () {
    const [row, entries] = yield* Effect.all([getRunRow(db, runId), listJournalEntries(db, runId)], { concurrency: 'unbounded' })
    if (row === undefined) return undefined
    // A corrupt contract (a StoreError, docs/durability.md): each entry still shows its own snapshot.
    const run = yield* Effect.orElseSucceed(getRun(db, runId), () => undefined)
    return replayJournal(entries, run === undefined ? undefined : machineInput(run.contract))
  })

/** `loadRunSnapshots` over a run's entries already read, in seq order; `input` is the run's machine input, if known. */
export const replayJournal = (entries: ReadonlyArray<JournalEntryRow>, input: RunMachineInput | undefined): SnapshotAt[] => {
  const out: SnapshotAt[] = []
  // The previous entry's snapshot: restored only when an entry has transitions to replay.
  let previous: Either.Either<PersistedRunSnapshot, string> = Either.left('follows no entry')
  for (const entry of entries) {
    const stored = jsonTextTooDeep(entry.snapshot_json, MAX_ENTRY_DEPTH)
      ? Either.left('is nested too deeply to read')
      : decodeRunSnapshot(entry.snapshot_json, input)
    const events = readEvents(entry)
    if (entry.seq > entry.first_seq) {
      let current: Either.Either<RunSnapshot, string> =
        input === undefined
          ? Either.left("cannot be replayed: the run's contract is not readable")
          : entry.first_seq === 1
            ? Either.right(initialRunSnapshot(input))
            : Either.flatMap(previous, (persisted) => restore(persisted, input))
      for (let seq = entry.first_seq; seq < entry.seq; seq++) {
        const event = events?.[seq - entry.first_seq]
        current =
          event === undefined ? Either.left('cannot be replayed: its entry is not readable') : Either.flatMap(current, (snapshot) => replay(snapshot, event))
        out.push({ seq, snapshot: Either.map(current, persistRunSnapshot) })
      }
    }
    out.push({ seq: entry.seq, snapshot: stored })
    previous = stored
  }
  return out
}

/** The events of an entry's transitions in seq order, or undefined when its JSON does not read. */
const readEvents = (entry: JournalEntryRow): ReadonlyArray<RunEvent> | undefined => {
  if (jsonTextTooDeep(entry.transitions_json, MAX_ENTRY_DEPTH)) return undefined
  try {
    const transitions = JSON.parse(entry.transitions_json) as unknown
    if (!Array.isArray(transitions) || transitions.length !== entry.seq - entry.first_seq + 1) return undefined
    return (transitions as JournalTransition[]).map((t) => t.event as RunEvent)
  } catch {
    return undefined
  }
}

const restore = (persisted: PersistedRunSnapshot, input: RunMachineInput): Either.Either<RunSnapshot, string> => {
  try {
    return Either.right(restoreRunSnapshot(persisted, input))
  } catch {
    return Either.left('cannot be replayed: the snapshot before it does not fit the run machine')
  }
}
const replay = (snapshot: RunSnapshot, event: RunEvent): Either.Either<RunSnapshot, string> => {
  try {
    return Either.right(nextRunSnapshot(snapshot, event))
  } catch {
    return Either.left('cannot be replayed through the run machine')
  }
}
