import { Either } from 'effect'
import { type Actor, type ActorScope, createActor, getInitialSnapshot, type SnapshotFrom, transition } from 'xstate'
import { type RunContext, type RunEvent, type RunMachineInput, runMachine } from './run-machine.js'
import type { RunStateValue } from './run-state.js'

/**
 * The version of the run machine's persisted snapshot that this code writes and reads. The
 * journal stores every snapshot in the envelope `{"v":1,"snapshot":...}` (docs/durability.md, "The
 * journal"): a snapshot written by a machine whose context has another shape is refused by
 * name, never restored into this one. Bump it, with a migration of the stored snapshots or a
 * reader of the old version, whenever the machine's context or states change incompatibly.
 */
export const RUN_SNAPSHOT_VERSION = 1

/** A live snapshot of the run machine. */
export type RunSnapshot = SnapshotFrom<typeof runMachine>

/** The run machine's persisted snapshot: what `getPersistedSnapshot` gives and `createActor` restores. */
export interface PersistedRunSnapshot {
  readonly status: string
  readonly value: RunStateValue
  readonly context: RunContext
  /** XState's own fields (`historyValue`, `children`, ...), restored as they are. */
  readonly [field: string]: unknown
}

const ENVELOPE_HEAD = `{"v":${RUN_SNAPSHOT_VERSION},"snapshot":`

/** The persisted form of `snapshot`, in the journal's versioned envelope. */
export const encodeRunSnapshot = (snapshot: RunSnapshot): string => `${ENVELOPE_HEAD}${JSON.stringify(persistRunSnapshot(snapshot))}}`

/**
 * The persisted snapshot a journal entry holds, or why it cannot be had: text that is not JSON,
 * no envelope, or a schema version this code does not read (written by a newer agentvisor).
 * The reason completes "its last snapshot ...".
 */
export const decodeRunSnapshot = (json: string): Either.Either<PersistedRunSnapshot, string> => {
  let envelope: unknown
  try {
    envelope = JSON.parse(json)
  } catch {
    return Either.left('is not readable')
  }
  if (typeof envelope !== 'object' || envelope === null || !('v' in envelope) || !('snapshot' in envelope)) {
    return Either.left('has no schema version')
  }
  if (envelope.v !== RUN_SNAPSHOT_VERSION) {
    return Either.left(
      `has schema version ${JSON.stringify(envelope.v)}, which this agentvisor does not read (it reads version ${RUN_SNAPSHOT_VERSION}): it was written by another version of agentvisor`
    )
  }
  const snapshot = envelope.snapshot
  if (typeof snapshot !== 'object' || snapshot === null) return Either.left('is not a machine snapshot')
  return Either.right(snapshot as PersistedRunSnapshot)
}

/** The machine's first snapshot for a run of this input: where a run's first journal entry starts. */
export const initialRunSnapshot = (input: RunMachineInput): RunSnapshot => getInitialSnapshot(runMachine, input)

/**
 * A persisted snapshot as a live one, the way resume restores it (an actor created from it, not
 * started: nothing runs). Throws when it does not fit the machine.
 */
export const restoreRunSnapshot = (persisted: PersistedRunSnapshot, input: RunMachineInput): RunSnapshot =>
  createActor(runMachine, { input, snapshot: persisted as never }).getSnapshot()

/** The persisted form of a live snapshot. */
export const persistRunSnapshot = (snapshot: RunSnapshot): PersistedRunSnapshot => {
  // The run machine has no child actors and no history states, so this is what
  // `getPersistedSnapshot` gives (run-snapshots.test.ts compares them), without its walk of the
  // context for actor references: the driver persists one snapshot at every commit.
  const { status, output, error, value, context } = snapshot
  return { status, output, error, value, historyValue: {}, context, children: {} } as unknown as PersistedRunSnapshot
}

/** The snapshot after `event`, computed by the pure machine: what the driver's actor had after sending it. */
export const nextRunSnapshot = (snapshot: RunSnapshot, event: RunEvent): RunSnapshot => transition(runMachine, snapshot, event)[0]

/**
 * How a drive moves its run's machine, without the actor's per-send work: the machine's own
 * `transition` under one scope made for the run (the actor's identity and system), so a send
 * costs no mailbox, no relay and no observers' walk, only the machine's macrostep. The run
 * machine has no child actors, delayed events or custom actions, so the scope has nothing to
 * defer, emit or stop; its snapshots are exactly those the actor would have taken
 * (run-snapshots.test.ts compares them). The actor then keeps only its life cycle (`stop` ends
 * the drive). An actor created with `inspect` (the Stately inspector, docs/inspector.md) is sent
 * every event instead, so that its inspection events go on: `undefined` then.
 */
export const runScopeOf = (actor: Actor<typeof runMachine>): ActorScope<RunSnapshot, RunEvent> | undefined => {
  if (actor.options.inspect !== undefined) return undefined
  return {
    self: actor,
    id: actor.id,
    sessionId: actor.sessionId,
    // The machine has no `log` actions; this is the default an actor gets.
    logger: console.log,
    system: actor.system,
    defer: runNow,
    emit: ignore,
    stopChild: ignore,
    actionExecutor: executeAction
  }
}

// One of each for every run's scope, not a closure per run.
const runNow = (fn: () => void): void => fn()
const ignore = (): undefined => undefined
const executeAction: ActorScope<RunSnapshot, RunEvent>['actionExecutor'] = (action) => action.exec?.(action.info, action.params)

/** The snapshot after `event` under a run's scope (`runScopeOf`): what its actor would take. */
export const runStep = (snapshot: RunSnapshot, event: RunEvent, scope: ActorScope<RunSnapshot, RunEvent>): RunSnapshot =>
  runMachine.transition(snapshot, event, scope)
