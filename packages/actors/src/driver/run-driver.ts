import { builtinCatalogue, type ChatMessage, priceOf, type ToolCall, type Usage } from '@agentvisor/core'
import type { LeaseLostError, StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import { type ChildRuns, makeChildRuns } from './child-runs.js'
import { runBudgetOf } from './budget.js'
import { type Drive, drivenNow, type RunDriverDeps } from './drive.js'
import { beginFollowUp } from './follow-up.js'
import { ENTRY_WORK, type EntryWorkTable } from './entry-work.js'
import { LATER, valueNow } from './now.js'
import { recoverLostDispatch } from './recovery.js'
import { type DurableHead, TransitionJournal, type Work } from './transition-journal.js'
import type { RunContext } from '../machine/run-machine.js'
import { runOutput } from './conversation.js'
import { notify, traceparentOf } from './run-observer.js'

/** One run's driver, as its supervision uses it (supervisor/supervise.ts, launch-run.ts). */
export interface RunDriver {
  /** Drives the run from where it stands until it pauses or ends. */
  readonly drive: Effect.Effect<void, StoreError | LeaseLostError>
  /** After an interrupt (cancel, timeout, takeover): flushes what is staged, writes nothing new. */
  readonly afterInterrupt: Effect.Effect<void>
  /** Settles a dispatch a crash left without an answer (driver/recovery.ts). */
  readonly recover: Effect.Effect<void, StoreError | LeaseLostError>
  readonly commit: (work: Work) => Effect.Effect<void, StoreError | LeaseLostError>
  /**
   * Begins a new turn of a finished run (docs/policy.md, "Follow-ups"): `text` joins the
   * conversation as the user's message after the last step, stored as that step's feedback
   * (after any it had) so a resume rebuilds the same conversation, in the commit of `FOLLOW_UP`.
   */
  readonly followUp: (text: string, at: number) => Effect.Effect<void, StoreError | LeaseLostError>
  readonly cancelChildren: Effect.Effect<void>
  readonly currentPath: () => string
  readonly context: () => RunContext
  readonly lastSeq: () => number
  /** What the run produced, read from its conversation (docs/agents.md, "Structured results"). */
  readonly output: () => unknown
  /** What the run's calls have cost so far (docs/task-file.md, "Usage and budgets"). */
  readonly usage: () => Usage
  readonly durable: () => DurableHead
}

/**
 * The driver of one run: performs each state's entry work (driver/entry-work.ts) and commits
 * the resulting transition through the run's journal (driver/transition-journal.ts). The
 * ordering rules live in those modules; this is only the loop. `entryWork` is the machine's
 * table; a test may hand it a changed one.
 */
export const makeRunDriver = (deps: RunDriverDeps, entryWork: EntryWorkTable = ENTRY_WORK): RunDriver => {
  const { db, runId, contract, actor, messages, observers } = deps
  const journal = new TransitionJournal(deps.writer, runId, deps.leaseToken, actor, observers, deps.seq, deps.concurrentRuns, deps.warn)
  const children = makeChildRuns({
    db,
    runId,
    contract,
    bus: deps.bus,
    toolCalls: () => drive.toolCalls,
    endUndriven: deps.endUndrivenChild,
    warn: deps.warn,
    traceparent: () => traceparentOf(observers, runId)
  })
  const drive = newDrive(deps, journal, children)
  announceDrive(deps, journal)

  /**
   * Drives the run until it finishes or pauses. Interrupting it is how cancel and timeout stop the
   * work; whoever interrupts it runs `afterInterrupt` once it is (see there).
   *
   * The loop is plain code while nothing waits (docs/architecture.md, "The hot path"): an entry
   * work that answers at once, and a commit the store makes at once, cost no Effect step; only a
   * real wait (a provider call in flight, a tool's I/O, a store that answers later) goes through
   * Effect, which is also where an interruption can land. A streak of work that never waits gives
   * the event loop a turn every `SYNC_STREAK` states, so timers, cancels and other runs get in.
   */
  const advance = (): Effect.Effect<void, StoreError | LeaseLostError> => {
    for (let streak = 0; ; streak++) {
      const entry = entryWork[journal.path()]
      // Anything with an effect starts only once everything staged before it is durable.
      if (entry === null || !entry.pure(drive)) {
        const flushing = journal.flushNow()
        if (flushing !== undefined) return Effect.flatMap(flushing, advance)
      }
      if (entry === null) return Effect.void
      if (streak === SYNC_STREAK) return Effect.flatMap(nextTurn, advance)
      const ran = entry.run(drive, journal.context())
      const next = valueNow(ran)
      if (next === LATER) {
        return Effect.flatMap(ran as Effect.Effect<Work | undefined, StoreError | LeaseLostError>, (work) => {
          if (work === undefined) return journal.flush
          journal.stage(work, drive.now())
          return advance()
        })
      }
      if (next === undefined) return journal.flush
      journal.stage(next, drive.now())
    }
  }
  const driveLoop: Effect.Effect<void, StoreError | LeaseLostError> = Effect.clockWith((clock) => {
    // Time comes from the fiber's Clock (tests move it), read without an Effect step.
    drive.clock = clock
    return advance()
  })

  /**
   * Interrupted (cancel, timeout) with pure transitions staged: they are history all the same.
   * Run by whoever interrupted `drive` rather than by an `onInterrupt` around it: that wrapper
   * would be one more frame every idle run keeps on its stack. Nothing staged, nothing written.
   */
  const afterInterrupt: Effect.Effect<void> = Effect.ignore(journal.flush)

  return {
    drive: driveLoop,
    afterInterrupt,
    recover: recoverLostDispatch(drive),
    commit: (work: Work) => journal.commit(work),
    followUp: (text, at) => beginFollowUp(journal, messages, runId, text, at),
    cancelChildren: children.cancelChildren,
    currentPath: (): string => journal.path(),
    context: () => journal.context(),
    lastSeq: () => journal.seq,
    output: (): unknown => runOutput(messages),
    usage: () => deps.usage.usage,
    durable: () => journal.durable
  }
}

/** A drive's record as it starts (drive.ts `Drive`): the step's conversation where the stored run left it. */
const newDrive = (deps: RunDriverDeps, journal: TransitionJournal, children: ChildRuns): Drive => {
  const { runId, contract } = deps
  const tools = deps.tools ?? builtinCatalogue
  return {
    deps,
    journal,
    children,
    tools,
    offeredTools: tools.offered(children.canSpawn),
    toolCalls: lastAssistantToolCalls(deps.messages),
    freshStep: undefined,
    commandSettings: undefined,
    now: drivenNow,
    clock: undefined,
    stepTools: { calls: undefined, tools: [] },
    budget: runBudgetOf(runId, contract),
    prices: contract.providers.map((config) => priceOf(contract.pricing, config)),
    toolsChars: undefined,
    dispatched: deps.providers.map((_, i) => deps.providerDispatches?.[i] ?? 0)
  }
}

/**
 * Tells the run's observers that this drive started, and that it ended when its actor stops: the
 * supervisor stops the actor whenever it lets go of the run (finished, paused, lease lost, runtime
 * closed), the one signal every way out of a drive shares. A run's row left for later is written
 * then (docs/durability.md, "The run's row").
 */
const announceDrive = (deps: RunDriverDeps, journal: TransitionJournal): void => {
  const { runId, contract, observers } = deps
  notify(observers, 'onDriveStarted', {
    runId,
    parentId: contract.lineage?.parentId,
    rootId: contract.lineage?.rootId,
    resumed: deps.seq > 0,
    state: journal.path(),
    step: journal.context().step,
    goal: contract.goal,
    agent: contract.agent,
    traceparent: deps.traceparent
  })
  deps.actor.subscribe({
    complete: () => {
      journal.endRefresh()
      notify(observers, 'onDriveEnded', { runId })
    }
  })
}

/** States entered in a row without a wait before the loop lets the event loop have a turn. */
const SYNC_STREAK = 64

/** One turn of the event loop (timers and I/O included, unlike a microtask). */
const nextTurn: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

const lastAssistantToolCalls = (messages: ReadonlyArray<ChatMessage>): ReadonlyArray<ToolCall> => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === 'assistant') return message.toolCalls
  }
  return []
}
