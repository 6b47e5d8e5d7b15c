import { fencedCall, storeCall } from '../store-call.js'
import type { RawRunWriter, RunWriter } from './run-writer.js'
import type { RunWrite } from './run-write.js'

/** The writes of one call, as a failure names them: `insertStep, setStepResults`. */
const opsOf = (writes: ReadonlyArray<RunWrite>): string => writes.map((write) => write.op).join(', ')

/**
 * The `RunWriter` of a dialect's `RawRunWriter`: each method the same call made a store call
 * (store-call.ts), named for its failure, the fenced ones keeping `LeaseLostError`. A name is
 * made only when a call failed: nothing is built for one that did not.
 */
export const runWriterOf = (raw: RawRunWriter): RunWriter => {
  const { refreshHead } = raw
  return {
    commit: (commit, options) =>
      fencedCall(
        () => `commit the transitions of run ${commit.runId}`,
        () => raw.commit(commit, options)
      ),
    ...(refreshHead !== undefined
      ? {
          refreshHead: (runId, leaseToken, head) =>
            fencedCall(
              () => `refresh the row of run ${runId}`,
              () => refreshHead(runId, leaseToken, head)
            )
        }
      : {}),
    createRun: (row, lease, options) =>
      storeCall(
        () => `create run ${row.id}`,
        () => raw.createRun(row, lease, options)
      ),
    write: (runId, leaseToken, writes) =>
      fencedCall(
        () => `write ${opsOf(writes)} of run ${runId}`,
        () => raw.write(runId, leaseToken, writes)
      ),
    approvals: (runId, step) =>
      storeCall(
        () => `load the requests of step ${step} of run ${runId}`,
        () => raw.approvals(runId, step)
      ),
    toolEffects: (runId, step) =>
      storeCall(
        () => `load the tool journal of step ${step} of run ${runId}`,
        () => raw.toolEffects(runId, step)
      ),
    loadRun: (runId) =>
      storeCall(
        () => `load run ${runId}`,
        () => raw.loadRun(runId)
      ),
    acquireLease: (input) =>
      storeCall(
        () => `take the lease of run ${input.runId}`,
        () => raw.acquireLease(input)
      ),
    attemptTotals: (runId) =>
      storeCall(
        () => `sum the receipts of run ${runId}`,
        () => raw.attemptTotals(runId)
      ),
    attemptRecorded: (runId, step, attempt) =>
      storeCall(
        () => `look up attempt ${attempt} of step ${step} of run ${runId}`,
        () => raw.attemptRecorded(runId, step, attempt)
      ),
    releaseLease: (runId, leaseToken, usageJson) =>
      storeCall(
        () => `release the lease of run ${runId}`,
        () => raw.releaseLease(runId, leaseToken, usageJson)
      ),
    settlePending: (runId, leaseToken, outcome, at) =>
      fencedCall(
        () => `settle the pending receipts of run ${runId}`,
        () => raw.settlePending(runId, leaseToken, outcome, at)
      ),
    rememberedRules: (workspace) => storeCall('load remembered decisions', () => raw.rememberedRules(workspace)),
    lastStepText: (runId) =>
      storeCall(
        () => `read the last answer of run ${runId}`,
        () => raw.lastStepText(runId)
      ),
    close: () => storeCall('close the run writer', () => raw.close())
  }
}
