// @ts-check
/** The run as it stood after an earlier transition: what the page shows while travelling back. */

/** @import { RunTreeNode, RunView } from '../src/inspector/run-view.js' */

/** States in which a step's tool calls are still being carried out (their results not all in). */
const TOOLS_PENDING = /^(acting|awaitingApproval|awaitingInput|awaitingChildren)/

/**
 * The run as it stood after `seq` (null: the run as it is): the steps answered by then (a step's
 * results once its tools were done), the attempts sent by then (one not settled yet shows in
 * flight), the requests made by then (pending if decided later), the policy events and the
 * children known by then.
 * @param {RunView} run
 * @param {number | null} seq
 * @returns {RunView}
 */
export const asOf = (run, seq) => {
  if (seq === null) return run
  const at = seq === 0 ? '' : (run.transitions[seq - 1]?.at ?? '')
  const snap = seq === 0 ? undefined : run.snapshots[seq - 1]
  const context = snap?.context
  const answered =
    typeof context === 'object' && context !== null && 'completedSteps' in context && typeof context.completedSteps === 'number' ? context.completedSteps : 0
  const toolsPending = TOOLS_PENDING.test(snap ? snap.state : 'dispatching')
  const by = (/** @type {string} */ time) => seq > 0 && time <= at
  /** @param {RunTreeNode} node @returns {RunTreeNode} */
  const keep = (node) => ({ ...node, children: node.children.filter((c) => by(c.createdAt)).map(keep) })
  return {
    ...run,
    steps: run.steps.filter((s) => s.step <= answered).map((s) => (s.step === answered && toolsPending ? { ...s, results: [] } : s)),
    receipts: run.receipts
      .map((r) => {
        const attempts = r.attempts
          .filter((a) => by(a.startedAt))
          .map((a) =>
            a.settledAt !== undefined && by(a.settledAt)
              ? a
              : { provider: a.provider, reason: a.reason, outcome: 'in_flight', ttftMs: null, startedAt: a.startedAt }
          )
        const winner = r.winner !== null && r.winner < attempts.length && attempts[r.winner]?.outcome === 'ok' ? r.winner : null
        return { step: r.step, attempts, winner }
      })
      .filter((r) => r.attempts.length > 0),
    approvals: run.approvals
      .filter((a) => by(a.createdAt))
      .map((a) =>
        a.decidedAt !== undefined && by(a.decidedAt) ? a : { ...a, status: 'pending', source: undefined, account: undefined, editedArguments: undefined }
      ),
    policyEvents: run.policyEvents.filter((e) => by(e.at)),
    tree: { ...keep(run.tree), id: run.tree.id }
  }
}
