import { Either } from 'effect'
import { type Actor, type ActorScope, createActor, getInitialSnapshot, transition } from 'xstate'
import { type RunContext, type RunEvent, type RunMachineInput, runMachine } from './run-machine.js'
import type { RunSnapshot, RunStateValue } from './run-state.js'
import { cachedRunStep } from './transition-cache.js'

/**
 * The version of the run machine's persisted snapshot that this code writes. The journal stores
 * every snapshot in the envelope `{"v":N,"snapshot":...}` (docs/durability.md, "The journal"): a
 * snapshot of a version this code does not read is refused by name, never restored into this
 * machine. Bump it, with a reader of the old version, whenever the machine's context or states
 * change incompatibly.
 *
 * - Version 1: XState's persisted snapshot as it is (`status`, `value`, `historyValue`,
 *   `context`, `children`), the context with the machine's input (the contract's limits) in it.
 * - Version 2 (written since 2026-12-02): `status`, `value` and the context without the input,
 *   which is the run's stored contract's (`machineInput`) and never changes during a run: ~40%
 *   fewer bytes in every journal entry. The reader puts the input back.
 */
export const RUN_SNAPSHOT_VERSION = 2

/** The versions `decodeRunSnapshot` reads. */
const READ_VERSIONS: ReadonlyArray<unknown> = [1, 2]

/** The run machine's persisted snapshot: what `getPersistedSnapshot` gives and `createActor` restores. */
export interface PersistedRunSnapshot {
  readonly status: string
  readonly value: RunStateValue
  readonly context: RunContext
  /** XState's own fields (`historyValue`, `children`, ...), restored as they are. */
  readonly [field: string]: unknown
}

/** The context fields a version 2 snapshot stores: all but the machine's input. */
type StoredContext = Omit<RunContext, keyof RunMachineInput>

/**
 * Every field of `StoredContext`, in the order `encodeRunSnapshot` writes them. A field added to
 * the run's context and not here does not compile (nor one here that the context lacks), and
 * `encodeRunSnapshot` must write it too: run-snapshots.test.ts round-trips every field.
 */
const STORED_FIELDS = {
  step: true,
  completedSteps: true,
  providerIndex: true,
  attempt: true,
  reason: true,
  retries: true,
  dispatches: true,
  retryAt: true,
  lastHadToolCalls: true,
  error: true,
  ended: true,
  spawnedChildren: true,
  turnStart: true,
  turnAt: true
} as const satisfies Record<keyof StoredContext, true>

/** How many context fields a version 2 snapshot holds (a test checks the encoder writes them all). */
export const STORED_CONTEXT_FIELDS = Object.keys(STORED_FIELDS).length

/**
 * The persisted form of `snapshot`, in the journal's versioned envelope, version 2. Written at
 * every commit, so it is built as text: every field of the context is a number, a boolean, null,
 * the `reason` literal or the `error` (stringified), and the state value a state's name or a
 * `finished` object; the output is what `JSON.stringify` gives for the same object
 * (run-snapshots.test.ts compares them).
 */
export const encodeRunSnapshot = (snapshot: RunSnapshot): string => {
  const c = snapshot.context
  const value = typeof snapshot.value === 'string' ? `"${snapshot.value}"` : JSON.stringify(snapshot.value)
  const error = c.error === null ? 'null' : JSON.stringify(c.error)
  // A run of one turn has no turn fields: nothing more is written for them.
  const turn = c.turnStart === undefined ? '' : `,"turnStart":${c.turnStart},"turnAt":${c.turnAt ?? null}`
  return `{"v":2,"snapshot":{"status":"${snapshot.status}","value":${value},"context":{"step":${c.step},"completedSteps":${c.completedSteps},"providerIndex":${c.providerIndex},"attempt":${c.attempt},"reason":"${c.reason}","retries":${c.retries},"dispatches":${c.dispatches},"retryAt":${c.retryAt},"lastHadToolCalls":${c.lastHadToolCalls},"error":${error},"ended":${c.ended},"spawnedChildren":${c.spawnedChildren}${turn}}}}`
}

/**
 * The persisted snapshot a journal entry holds, or why it cannot be had: text that is not JSON,
 * no envelope, or a schema version this code does not read (written by a newer agentvisor).
 * The reason completes "its last snapshot ...". `input` is the run's machine input (from its
 * contract), which a version 2 snapshot does not store; without it (a contract that does not
 * read) the context is given as stored.
 */
export const decodeRunSnapshot = (json: string, input: RunMachineInput | undefined): Either.Either<PersistedRunSnapshot, string> => {
  let envelope: unknown
  try {
    envelope = JSON.parse(json)
  } catch {
    return Either.left('is not readable')
  }
  if (typeof envelope !== 'object' || envelope === null || !('v' in envelope) || !('snapshot' in envelope)) {
    return Either.left('has no schema version')
  }
  if (!READ_VERSIONS.includes(envelope.v)) {
    return Either.left(
      `has schema version ${JSON.stringify(envelope.v)}, which this agentvisor does not read (it reads versions ${READ_VERSIONS.join(' and ')}): it was written by another version of agentvisor`
    )
  }
  const snapshot = envelope.snapshot
  if (typeof snapshot !== 'object' || snapshot === null) return Either.left('is not a machine snapshot')
  if (envelope.v === 1) return Either.right(snapshot as PersistedRunSnapshot)
  const stored = snapshot as { readonly status?: unknown; readonly value?: unknown; readonly context?: unknown }
  const context = typeof stored.context === 'object' && stored.context !== null ? stored.context : undefined
  // XState's fields that the run machine leaves empty (no history states, no child actors).
  return Either.right({
    status: stored.status,
    value: stored.value,
    historyValue: {},
    context: input === undefined || context === undefined ? context : { ...input, ...context },
    children: {}
  } as PersistedRunSnapshot)
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
 * `transition` (through its transition cache, transition-cache.ts) under one scope made for the
 * run (the actor's identity and system), so a send costs no mailbox, no relay and no observers'
 * walk, only the machine's macrostep. The run machine has no child actors, delayed events or
 * custom actions, so the scope has nothing to defer, emit or stop; its snapshots are exactly those
 * the actor would have taken (run-snapshots.test.ts and transition-cache.test.ts compare them).
 * The actor then keeps only its life cycle (`stop` ends the drive). An actor created with
 * `inspect` (the Stately inspector, docs/inspector.md) is sent every event instead, so that its
 * inspection events go on: `undefined` then.
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
export const runStep = (snapshot: RunSnapshot, event: RunEvent, scope: ActorScope<RunSnapshot, RunEvent>): RunSnapshot => cachedRunStep(snapshot, event, scope)
