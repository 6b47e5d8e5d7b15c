import { verifyNow, verifyRunsCommands } from '@agentvisor/core'
import type { RunContext } from '../machine/run-machine.js'
import { finalAnswerOf } from './conversation.js'
import { commandsOf, type Drive, redact } from './drive.js'
import { type Now, thenNow } from './now.js'
import { noProgressWarning, progressVerdict, stalledError } from './stall.js'
import type { Work } from './transition-journal.js'

const PASSED: Work = { event: { type: 'VERIFY_PASSED' } }
const FAILED: Work = { event: { type: 'VERIFY_FAILED' } }

/**
 * Whether `verifying` may be staged behind the transition into it: its checks only read files
 * (or there is no contract), so running them again after a crash changes nothing.
 */
export const verifyingIsPure = (drive: Drive): boolean => {
  const checks = drive.deps.contract.verify
  return checks === undefined || !verifyRunsCommands(checks)
}

/**
 * `verifying`'s entry work: checks the contract; a model that stops short is told why. A file
 * check answers at once (a plain value, no Effect to run); a command later.
 */
export const check = (drive: Drive, ctx: RunContext): Now<Work> => {
  const { contract, workspace } = drive.deps
  if (contract.output !== undefined) return checkWithOutput(drive, ctx)
  // Without a contract the run is done when the model stops asking for tools.
  if (contract.verify === undefined) return ctx.lastHadToolCalls ? FAILED : PASSED
  return thenNow(verifyNow(workspace, contract.verify, commandsOf(drive)), (result): Work => {
    if (result.passed) return PASSED
    if (ctx.lastHadToolCalls) return FAILED
    // The model thinks it is done but the contract disagrees: tell it why.
    return notReached(drive, ctx, result.detail)
  })
}

/**
 * Verification failed where the model thought it was done: it is told `feedback` with the next
 * dispatch, with the stall warning when this step is the `window`th without progress, or the run
 * ends `stalled` when it is one past (stall.ts).
 */
const toldWhy = (drive: Drive, ctx: RunContext, given: string): Work => {
  const stall = drive.deps.contract.limits.stall
  const verdict = stall === undefined ? 'go' : progressVerdict(drive.deps.messages, [{ role: 'user', content: given }], stall)
  const feedback = verdict === 'warn' && stall !== undefined ? given + noProgressWarning(stall) : given
  return {
    event: verdict === 'stall' && stall !== undefined ? { type: 'FAIL', error: stalledError(stall) } : { type: 'VERIFY_FAILED' },
    writes: [{ op: 'setStepFeedback', runId: drive.deps.runId, step: ctx.step, feedback }],
    after: () => drive.deps.messages.push({ role: 'user', content: feedback })
  }
}

/** The contract's checks failed where the model thought it was done. */
const notReached = (drive: Drive, ctx: RunContext, detail: string): Work =>
  toldWhy(drive, ctx, `The goal is not reached yet: ${redact(drive, detail)}. Keep working.`)

const NO_FINAL_ANSWER = 'You have not given your result yet: call final_answer with it (its arguments must match its schema).'

/**
 * An agent with an `output` is done once a `final_answer` of its last answer was accepted (and
 * its `verify`, if any, passes); an answer without tool calls is told to give its result
 * (docs/agents.md, "Structured results").
 */
const checkWithOutput = (drive: Drive, ctx: RunContext): Now<Work> => {
  const { contract, workspace } = drive.deps
  if (finalAnswerOf(drive.deps.messages) === undefined) return ctx.lastHadToolCalls ? FAILED : toldWhy(drive, ctx, NO_FINAL_ANSWER)
  if (contract.verify === undefined) return PASSED
  return thenNow(verifyNow(workspace, contract.verify, commandsOf(drive)), (result): Work => (result.passed ? PASSED : notReached(drive, ctx, result.detail)))
}
