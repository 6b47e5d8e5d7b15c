import type { RunWrite } from './run-write.js'

/**
 * The same writes with less for the server to do, the same rows in the end: a step's results or
 * feedback set by the very commit that inserts the step go into its INSERT (one row version
 * instead of two), and an empty batch of policy events is no write at all (as
 * `insertPolicyEvents` skips it). The writes are returned as they are when nothing folds.
 */
export const compactWrites = (writes: ReadonlyArray<RunWrite>): ReadonlyArray<RunWrite> => {
  let compacted: RunWrite[] | undefined
  for (let i = 0; i < writes.length; i++) {
    const write = writes[i]!
    if (write.op === 'insertPolicyEvents' && write.rows.length === 0) {
      compacted ??= writes.slice(0, i)
      continue
    }
    if (write.op === 'setStepResults' || write.op === 'setStepFeedback') {
      const list = compacted ?? writes
      const end = compacted === undefined ? i : list.length
      let at = -1
      for (let j = end - 1; j >= 0; j--) {
        const earlier = list[j]!
        if (earlier.op === 'insertStep' && earlier.row.run_id === write.runId && earlier.row.step === write.step) {
          at = j
          break
        }
      }
      if (at !== -1) {
        compacted ??= writes.slice(0, i)
        const insert = compacted[at] as Extract<RunWrite, { op: 'insertStep' }>
        compacted[at] = {
          op: 'insertStep',
          row: write.op === 'setStepResults' ? { ...insert.row, results_json: write.resultsJson } : { ...insert.row, feedback: write.feedback }
        }
        continue
      }
    }
    compacted?.push(write)
  }
  return compacted ?? writes
}
