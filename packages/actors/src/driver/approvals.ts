import type { LeaseLostError, StoreError } from '@agentvisor/store'
import { Effect, Either } from 'effect'
import { approvalRequestOf, decideRequest } from '../approval/decide.js'
import { ApproverFailedError } from '../errors.js'
import { stderrLog } from '../loop/survive.js'
import type { RunContext } from '../machine/run-machine.js'
import { iso, nowMs } from './now.js'
import type { Drive } from './drive.js'
import type { Work } from './transition-journal.js'

/** How often a request being asked of an approver is looked up, for a decision made elsewhere. */
const ELSEWHERE_POLL_MS = 250

/**
 * Succeeds (true) once request `id` of the step is no longer pending in the store: decided or
 * answered by someone other than the approver being asked. A failed look is looked again.
 */
export const settledElsewhere = (drive: Drive, step: number, id: string): Effect.Effect<true> =>
  Effect.gen(function* () {
    const { deps } = drive
    for (;;) {
      yield* Effect.sleep(ELSEWHERE_POLL_MS)
      const rows = yield* Effect.either(deps.writer.approvals(deps.runId, step))
      if (Either.isRight(rows) && rows.right.find((row) => row.id === id)?.status !== 'pending') return true as const
    }
  })

const DECIDED: Work = { event: { type: 'APPROVALS_DECIDED' } }

/**
 * `awaitingApproval`'s entry work: waits for the step's requests to be decided. With an
 * approver (terminal or TS callback) it asks now; otherwise the run pauses here (the process
 * may exit) until `approve` and `resume` (docs/policy.md).
 *
 * An approver that throws or rejects, or whose edit is refused, gave no answer: that request
 * stays pending, the failure is logged in one line, and the run pauses as if there were no
 * approver; `resume` asks again (docs/typescript-api.md, "Approvals"). A request decided
 * meanwhile by someone else (`agentvisor approve`) is decided: first decision wins.
 */
export const awaitApprovals = (drive: Drive, ctx: RunContext): Effect.Effect<Work | undefined, StoreError | LeaseLostError> =>
  Effect.gen(function* () {
    const { deps } = drive
    const { contract } = deps
    // Questions (`ask_human`) are answered in `awaitingInput`, by a person: not here.
    const pending = (yield* deps.writer.approvals(deps.runId, ctx.step)).filter((a) => a.status === 'pending' && a.kind !== 'input')
    if (pending.length > 0) {
      const approver = deps.approver
      // Recovery requests are an operator's call (`approve --retry|--completed|--abort`).
      if (approver === undefined || contract.approval !== 'prompt' || pending.some((r) => r.kind === 'recovery')) return undefined
      const noAnswer = (reason: string): Effect.Effect<boolean> =>
        Effect.sync(() => {
          ;(deps.warn ?? stderrLog)(`run ${deps.runId}: ${reason}; the request stays pending and the run pauses until it is decided (approve, then resume)`)
          return false
        })
      for (const request of pending) {
        const asked = Effect.tryPromise({
          try: (signal) => approver.decide(approvalRequestOf(request), signal),
          catch: (cause) => new ApproverFailedError({ requestId: request.id, cause })
        }).pipe(
          // Once answered, the decision is written whole, whatever else happens meanwhile.
          Effect.flatMap((answer) =>
            Effect.uninterruptible(
              Effect.flatMap(nowMs, (ms) =>
                decideRequest({
                  db: deps.db,
                  policy: deps.policy,
                  tools: drive.tools,
                  workspace: contract.workspace,
                  request,
                  answer,
                  source: approver.source,
                  at: iso(ms)
                })
              )
            )
          ),
          Effect.as(true),
          Effect.catchTags({
            ApproverFailedError: (error) => noAnswer(error.message),
            EditRefusedError: (error) => noAnswer(`the approver's edit of request ${request.id} is refused: ${error.reason}`),
            RequestDecidedError: () => Effect.succeed(true),
            // Unreachable: a run with a recovery request pending is not asked (above).
            RecoveryDecisionNeededError: (error) => Effect.die(error)
          })
        )
        // Whoever decides first: the approver, or anyone else (`approve`, NATS, the inspector)
        // while it is being asked; the approver's question is then withdrawn (its signal aborts).
        const decided = yield* Effect.race(asked, settledElsewhere(drive, ctx.step, request.id))
        if (!decided) return undefined
      }
    }
    return DECIDED
  })
