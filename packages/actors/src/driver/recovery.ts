import type { LeaseLostError, StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Drive } from './drive.js'

/**
 * Prepares a restored run: a dispatch that was in flight when the last driver died is settled
 * `unknown` (the provider may have answered) and sent again as a new attempt. (An exec in flight
 * is the tool journal's to recover, tool-journal.ts.)
 */
export const recoverLostDispatch = (drive: Drive): Effect.Effect<void, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    const { journal, deps } = drive
    const { writer, runId } = deps
    if (journal.path() !== 'dispatching') return
    yield* writer.settlePending(runId, deps.leaseToken, 'unknown', new Date().toISOString())
    // The current attempt's receipt exists: that dispatch went out (a crash left it pending, now
    // `unknown`; a shutdown settled it `cancelled`). The next one is a new attempt.
    const ctx = journal.context()
    if (yield* writer.attemptRecorded(runId, ctx.step, ctx.attempt)) yield* journal.commit({ event: { type: 'DISPATCH_LOST' } })
  })
