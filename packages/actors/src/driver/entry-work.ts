import { awaitAnswers } from './questions.js'
import type { LeaseLostError, StoreError } from '@agentvisor/store'
import type { RunContext } from '../machine/run-machine.js'
import type { RunStatePath } from '../machine/run-state.js'
import { awaitApprovals } from './approvals.js'
import { awaitChildren } from './children.js'
import type { Drive } from './drive.js'
import { dispatch, nextProvider } from './model-call.js'
import type { Now } from './now.js'
import { waitToRetry } from './retry-wait.js'
import { act } from './tool-execution.js'
import type { Work } from './transition-journal.js'
import { check, verifyingIsPure } from './verification.js'

/** What a live state does on entry. */
export interface EntryWork {
  /**
   * The work; `undefined` when the run pauses here (a decision only a person can make). A value
   * when it is done at once, an Effect when it waits (now.ts).
   */
  readonly run: (drive: Drive, ctx: RunContext) => Now<Work | undefined, StoreError | LeaseLostError>
  /**
   * Whether the work is pure, so the transition into the state may stay staged while it runs
   * (transition-journal.ts, "Staging"): its effects, if any, are made durable before they start.
   */
  readonly pure: (drive: Drive) => boolean
}

/**
 * The entry work of every state of the run machine (docs/architecture.md): keyed by the machine's
 * own state paths, so adding a state to run-machine.ts without its entry here does not compile.
 * A final state has no work (`null`): the run ends there.
 */
export type EntryWorkTable = { readonly [P in RunStatePath]: EntryWork | null }

const always = (): boolean => true
const never = (): boolean => false

export const ENTRY_WORK: EntryWorkTable = {
  // Only the checks before the call are pure: the dispatch itself flushes before it calls.
  dispatching: { run: dispatch, pure: always },
  fallingOver: { run: () => nextProvider, pure: always },
  retrying: { run: waitToRetry, pure: never },
  // Only plans and reads: a tool with an effect flushes first, with its `started` (tool-execution.ts).
  acting: { run: act, pure: always },
  verifying: { run: check, pure: verifyingIsPure },
  awaitingApproval: { run: awaitApprovals, pure: never },
  awaitingInput: { run: awaitAnswers, pure: never },
  awaitingChildren: { run: awaitChildren, pure: never },
  'finished.succeeded': null,
  'finished.stepCapReached': null,
  'finished.failed': null,
  'finished.cancelled': null,
  'finished.timedOut': null
}
