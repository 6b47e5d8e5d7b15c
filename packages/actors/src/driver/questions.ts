import type { LeaseLostError, StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import { answerRequest } from '../approval/answer-request.js'
import { ApproverFailedError } from '../errors.js'
import { stderrLog } from '../loop/survive.js'
import type { RunContext } from '../machine/run-machine.js'
import { iso, nowMs } from './now.js'
import type { Drive } from './drive.js'
import type { Work } from './transition-journal.js'
import { settledElsewhere } from './approvals.js'

const ELSEWHERE = Symbol('answered elsewhere')

const ANSWERED: Work = { event: { type: 'INPUT_ANSWERED' } }

/**
 * `awaitingInput`'s entry work: waits for the step's questions (`ask_human`) to be answered. With
 * `approval: prompt` and an approver that answers questions (the terminal) it asks now; otherwise
 * the run pauses here, the process may exit (3), until `agentvisor answer` and `resume`
 * (docs/policy.md, "Questions"). `approval: auto` never answers a question: only a person does.
 */
export const awaitAnswers = (drive: Drive, ctx: RunContext): Effect.Effect<Work | undefined, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    const { deps } = drive
    const pending = (yield* deps.writer.approvals(deps.runId, ctx.step)).filter((request) => request.kind === 'input' && request.status === 'pending')
    if (pending.length === 0) return ANSWERED
    const ask = deps.approver?.answer
    if (ask === undefined || deps.contract.approval !== 'prompt') return undefined
    for (const request of pending) {
      const asked = Effect.tryPromise({
        try: (signal) => ask({ id: request.id, step: request.step, question: request.target }, signal),
        catch: (cause) => new ApproverFailedError({ requestId: request.id, cause })
      }).pipe(
        Effect.catchTag('ApproverFailedError', (error) =>
          Effect.sync(() => {
            ;(deps.warn ?? stderrLog)(
              `run ${deps.runId}: ${error.message}; the question stays open and the run pauses until it is answered (answer, then resume)`
            )
            return undefined
          })
        )
      )
      // An answer given elsewhere (NATS, `agentvisor answer`, the inspector) while the terminal asks wins too.
      const text = yield* Effect.race(asked, Effect.as(settledElsewhere(drive, ctx.step, request.id), ELSEWHERE))
      if (text === ELSEWHERE) continue
      if (text === undefined) return undefined
      const at = iso(yield* nowMs)
      yield* answerRequest(deps.db, request.id, text, deps.approver?.source ?? 'prompt', at).pipe(Effect.catchTag('RequestDecidedError', () => Effect.void))
    }
    return ANSWERED
  })
