import type { LeaseLostError, StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import { approvalRequestOf, decideRequest } from '../approval/decide.js'
import type { RunContext } from '../machine/run-machine.js'
import { iso, nowMs, store } from '../supervisor/driver-io.js'
import type { Drive } from './drive.js'
import type { Work } from './transition-journal.js'

const DECIDED: Work = { event: { type: 'APPROVALS_DECIDED' } }

/**
 * `awaitingApproval`'s entry work: waits for the step's requests to be decided. With an
 * approver (terminal or TS callback) it asks now; otherwise the run pauses here (the process
 * may exit) until `approve` and `resume` (docs/policy.md).
 */
export const awaitApprovals = (drive: Drive, ctx: RunContext): Effect.Effect<Work | undefined, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    const { deps } = drive
    const { contract } = deps
    const pending = (yield* store('load approvals', () => deps.writer.approvals(deps.runId, ctx.step))).filter((a) => a.status === 'pending')
    if (pending.length > 0) {
      const approver = deps.approver
      // Recovery requests are an operator's call (`approve --retry|--completed|--abort`).
      if (approver === undefined || contract.approval !== 'prompt' || pending.some((r) => r.kind === 'recovery')) return undefined
      for (const request of pending) {
        const answer = yield* Effect.promise(() => approver.decide(approvalRequestOf(request)))
        const at = iso(yield* nowMs)
        yield* store('record decision', () =>
          decideRequest({ db: deps.db, policy: deps.policy, tools: drive.tools, workspace: contract.workspace, request, answer, source: approver.source, at })
        )
      }
    }
    return DECIDED
  })
