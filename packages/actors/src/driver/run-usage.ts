import { type TaskContract, type Usage, UsageTally } from '@agentvisor/core'
import {
  type AttemptTotals,
  type Executor,
  type LeaseLostError,
  type RunWriter,
  runAttemptTotals,
  runContracts,
  type StoreError,
  treeAttemptTotals
} from '@agentvisor/store'
import { Effect } from 'effect'
import { addTotals } from './budget.js'

// A run's `usage` and its tree's `treeUsage` (docs/task-file.md, "Usage and budgets"): what the
// providers reported for every receipt, priced by each run's own contract.

/** An empty tally for a run of this contract: priced when the task has `pricing`. */
export const usageTally = (contract: TaskContract): UsageTally => new UsageTally(contract.pricing !== undefined)

/** What a run's receipts add up to, priced by its contract (tokens only without one). */
export const runUsageOf = (db: Executor, runId: string, contract: TaskContract | undefined): Effect.Effect<UsageTally, StoreError> =>
  Effect.map(runAttemptTotals(db, runId), (totals) => tallyOfTotals(runId, contract, totals))

/** A run's receipts summed (`runAttemptTotals`) as its tally, priced by its contract (tokens only without one). */
const tallyOfTotals = (runId: string, contract: TaskContract | undefined, totals: ReadonlyArray<AttemptTotals>): UsageTally => {
  const tally = contract === undefined ? new UsageTally(false) : usageTally(contract)
  addTotals(tally, totals, contract === undefined ? new Map() : new Map([[runId, contract]]), 'report')
  return tally
}

/** What a run and every run below it spent, each run's receipts priced by its own contract (as a run ends, and in its trace). */
export const treeUsageOf = (db: Executor, runId: string): Effect.Effect<Usage, StoreError> =>
  Effect.gen(function* () {
    const totals = yield* treeAttemptTotals(db, runId)
    // A contract that does not read leaves the tokens without dollars (docs/durability.md, "Corrupt rows").
    const contracts = yield* runContracts(db, [...new Set([runId, ...totals.map((row) => row.runId)])]).pipe(
      Effect.orElseSucceed(() => new Map<string, TaskContract>())
    )
    const tally = new UsageTally(contracts.size > 0 && [...contracts.values()].every((contract) => contract.pricing !== undefined))
    addTotals(tally, totals, contracts, 'report')
    return tally.usage
  })

/**
 * `runUsageOf` for a resumed run's driver: where its tally starts, read through its run writer
 * (prepared statements, no query building: a process resuming its runs does it for each).
 */
export const storedRunUsage = (writer: RunWriter, runId: string, contract: TaskContract): Effect.Effect<UsageTally, StoreError | LeaseLostError> =>
  Effect.map(writer.attemptTotals(runId), (totals) => tallyOfTotals(runId, contract, totals))
