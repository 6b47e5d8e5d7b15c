import { verifyNow, verifyRunsCommands } from '@agentvisor/core'
import type { RunContext } from '../machine/run-machine.js'
import { commandsOf, type Drive, redact } from './drive.js'
import { type Now, thenNow } from './now.js'
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
  const { contract, workspace, messages, runId } = drive.deps
  // Without a contract the run is done when the model stops asking for tools.
  if (contract.verify === undefined) return ctx.lastHadToolCalls ? FAILED : PASSED
  return thenNow(verifyNow(workspace, contract.verify, commandsOf(drive)), (result): Work => {
    if (result.passed) return PASSED
    if (ctx.lastHadToolCalls) return FAILED
    // The model thinks it is done but the contract disagrees: tell it why.
    const feedback = `The goal is not reached yet: ${redact(drive, result.detail)}. Keep working.`
    return {
      event: { type: 'VERIFY_FAILED' },
      writes: [{ op: 'setStepFeedback', runId, step: ctx.step, feedback }],
      after: () => messages.push({ role: 'user', content: feedback })
    }
  })
}
