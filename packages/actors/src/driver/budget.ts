import {
  costOf,
  DEFAULT_RESERVED_OUTPUT_TOKENS,
  estimateTokens,
  type ModelPrice,
  priceOf,
  roundUsd,
  type TaskContract,
  type Usage,
  UsageTally
} from '@agentvisor/core'
import { type AttemptTotals, type LeaseLostError, runContracts, type StoreError, treeAttemptTotals, treePendingAttempts } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Kysely } from 'kysely'
import type { Database } from '@agentvisor/store'

// Token and dollar budgets (docs/task-file.md, "Usage and budgets"). A budget bounds what a run
// tree spends: before every dispatch, the tree's recorded usage plus what the calls in flight
// may still spend plus what this call may spend is held against it, and a call that could pass
// it is not sent. What a call may spend before its answer is in is its reservation: its prompt,
// estimated, and its `model.maxTokens` (4096 when unset) of answer.

/** What a call may spend at most, before its answer says what it did. */
export interface Reservation {
  readonly tokens: number
  readonly costUsd: number
}

/** A call's reservation and what it is made of, which a refusal names (docs/task-file.md, "Usage and budgets"). */
export interface Claim extends Reservation {
  /** Its prompt, estimated (`promptTokens`). */
  readonly promptTokens: number
  /** Its answer allowance: the agent's `model.maxTokens`, or the default. */
  readonly answerTokens: number
  /** The setting the allowance comes from: `model.maxTokens`, or a delegate's `agents.<name>.model.maxTokens`. */
  readonly answerSetting: string
  /** The setting is unset: the allowance is `DEFAULT_RESERVED_OUTPUT_TOKENS`. */
  readonly answerDefault: boolean
}

/** What a tree's calls in flight may still spend, and how many they are. */
export interface InFlight extends Reservation {
  readonly calls: number
}

/** What a budget is held against before a call: what was spent, and what the calls in flight may still spend. */
export interface Spending {
  readonly spent: Usage
  readonly inFlight: InFlight
}

const NOTHING_IN_FLIGHT: InFlight = { calls: 0, tokens: 0, costUsd: 0 }

/** A run's own spending, kept in memory: it has no call in flight while it checks its next one. */
export const ownSpending = (spent: Usage): Spending => ({ spent, inFlight: NOTHING_IN_FLIGHT })

/** The bounds of one budget; either may be absent. */
export interface Bounds {
  readonly maxTokens?: number | undefined
  readonly maxCostUsd?: number | undefined
}

/** The budgets a run's dispatches are held against. */
export interface RunBudget {
  /** The tree's root: its budget is shared by every run below it. */
  readonly rootId: string
  /** The root's limits, for the whole tree. */
  readonly tree: Bounds
  /** The run's own limits where they are lower than the tree's (a delegate's, a `spawn_child` call's). */
  readonly own: Bounds
}

const hasBounds = (bounds: Bounds): boolean => bounds.maxTokens !== undefined || bounds.maxCostUsd !== undefined

/** The budgets of a run with this contract, or undefined when nothing bounds it (no cost at dispatch). */
export const runBudgetOf = (runId: string, contract: TaskContract): RunBudget | undefined => {
  const { lineage, limits } = contract
  const tree: Bounds = lineage === undefined ? limits : { maxTokens: lineage.treeMaxTokens, maxCostUsd: lineage.treeMaxCostUsd }
  const lower = (own: number | undefined, shared: number | undefined): number | undefined =>
    own !== undefined && (shared === undefined || own < shared) ? own : undefined
  const own: Bounds = lineage === undefined ? {} : { maxTokens: lower(limits.maxTokens, tree.maxTokens), maxCostUsd: lower(limits.maxCostUsd, tree.maxCostUsd) }
  if (!hasBounds(tree) && !hasBounds(own)) return undefined
  return { rootId: lineage?.rootId ?? runId, tree, own }
}

/** The answer tokens a call of this contract's agent reserves. */
export const reservedOutputTokens = (contract: TaskContract): number => contract.model?.maxTokens ?? DEFAULT_RESERVED_OUTPUT_TOKENS

/** A call's reservation at this price: `promptTokens` of prompt and the agent's answer tokens. */
export const reservationOf = (contract: TaskContract, price: ModelPrice | undefined, promptTokens: number): Claim => {
  const output = reservedOutputTokens(contract)
  return {
    tokens: promptTokens + output,
    costUsd: price === undefined ? 0 : costOf(price, promptTokens, output),
    promptTokens,
    answerTokens: output,
    answerSetting: contract.agent === undefined ? 'model.maxTokens' : `agents.${contract.agent}.model.maxTokens`,
    answerDefault: contract.model?.maxTokens === undefined
  }
}

/** The prompt a request sends, in estimated tokens: every message's text and arguments, and the tools' specs. */
export const promptTokens = (
  messages: ReadonlyArray<{ readonly content: string; readonly toolCalls?: ReadonlyArray<{ readonly arguments: string }> }>,
  toolsChars: number
): number => {
  let characters = toolsChars
  for (const message of messages) {
    characters += message.content.length
    if (message.toolCalls !== undefined) for (const call of message.toolCalls) characters += call.arguments.length + 16
  }
  return estimateTokens(characters)
}

/**
 * This process's share of every budgeted tree it drives runs of: the reservations of its calls
 * in flight (the store shows only that a call is pending, not what it may cost), and one lock per
 * tree, so that two of its runs never check against the same figures and both go (a tree of
 * parallel children cannot together pass its budget). Runs of the tree driven by other processes
 * count with the reservation the store can tell: their answer tokens, without their prompt.
 */
export interface TreeBudgets {
  /** `effect` with the tree's lock held. */
  readonly locked: <A, E, R>(rootId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  readonly reserve: (rootId: string, key: string, reservation: Reservation) => void
  /** Once the call's settlement is durable. */
  readonly release: (rootId: string, key: string) => void
  /** What the tree's runs spent and may still spend, read from the store under the lock. */
  readonly spent: (db: Kysely<Database>, rootId: string) => Effect.Effect<Spending, StoreError | LeaseLostError>
}

/** A receipt's key among a tree's reservations. */
export const attemptKey = (runId: string, step: number, attempt: number): string => `${runId}/${step}/${attempt}`

export const makeTreeBudgets = (): TreeBudgets => {
  const locks = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
  const reservations = new Map<string, Map<string, Reservation>>()
  // A contract never changes once written: read once per run per process.
  const contracts = new Map<string, TaskContract>()
  const contractsOf = (db: Kysely<Database>, ids: ReadonlyArray<string>) => {
    const missing = ids.filter((id) => !contracts.has(id))
    if (missing.length === 0) return Effect.void
    return Effect.map(runContracts(db, missing), (found) => {
      for (const [id, contract] of found) contracts.set(id, contract)
    })
  }
  return {
    locked: (rootId, effect) =>
      Effect.suspend(() => {
        let lock = locks.get(rootId)
        if (lock === undefined) {
          lock = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
          locks.set(rootId, lock)
        }
        const held = lock
        held.users++
        return Effect.ensuring(
          held.semaphore.withPermits(1)(effect),
          Effect.sync(() => {
            if (--held.users === 0) locks.delete(rootId)
          })
        )
      }),
    reserve: (rootId, key, reservation) => {
      let tree = reservations.get(rootId)
      if (tree === undefined) {
        tree = new Map()
        reservations.set(rootId, tree)
      }
      tree.set(key, reservation)
    },
    release: (rootId, key) => {
      const tree = reservations.get(rootId)
      if (tree === undefined) return
      tree.delete(key)
      if (tree.size === 0) reservations.delete(rootId)
    },
    spent: (db, rootId) =>
      Effect.gen(function* () {
        const totals = yield* treeAttemptTotals(db, rootId)
        const pending = totals.some((row) => row.outcome === 'pending') ? yield* treePendingAttempts(db, rootId) : []
        yield* contractsOf(db, [...new Set(totals.map((row) => row.runId))])
        const mine = reservations.get(rootId)
        const tally = new UsageTally(true)
        addTotals(tally, totals, contracts, 'reserve')
        let reservedTokens = 0
        let reservedUsd = 0
        const inFlight = new Set<string>()
        for (const call of pending) {
          const key = attemptKey(call.runId, call.step, call.attempt)
          inFlight.add(key)
          const reservation = mine?.get(key) ?? foreignReservation(contracts.get(call.runId), totals, call.runId)
          reservedTokens += reservation.tokens
          reservedUsd += reservation.costUsd
        }
        // A reservation whose receipt is no longer pending is settled (or never was written): its
        // figures are in the totals now.
        if (mine !== undefined) for (const key of mine.keys()) if (!inFlight.has(key)) mine.delete(key)
        const usage = tally.usage
        return { spent: { ...usage, costUsd: usage.costUsd ?? 0 }, inFlight: { calls: pending.length, tokens: reservedTokens, costUsd: reservedUsd } }
      })
  }
}

/**
 * What a call another process has in flight may spend, as far as the store tells: its agent's
 * answer tokens, at its model's answer price (its prompt is counted once it settles).
 */
const foreignReservation = (contract: TaskContract | undefined, totals: ReadonlyArray<AttemptTotals>, runId: string): Reservation => {
  if (contract === undefined) return { tokens: DEFAULT_RESERVED_OUTPUT_TOKENS, costUsd: 0 }
  const provider = totals.find((row) => row.runId === runId && row.outcome === 'pending')?.provider
  const config = contract.providers.find((p) => p.name === provider)
  return reservationOf(contract, config === undefined ? undefined : priceOf(contract.pricing, config), 0)
}

/**
 * Adds receipts' totals to a tally, each priced by its own run's contract. `reserve`: a receipt
 * whose call may have been made though it reported nothing (`unknown`) counts as its reservation,
 * as a budget must; `report`: only what the providers reported, as usage figures are.
 */
export const addTotals = (
  tally: UsageTally,
  totals: ReadonlyArray<AttemptTotals>,
  contracts: ReadonlyMap<string, TaskContract>,
  unknownCalls: 'reserve' | 'report'
): void => {
  for (const row of totals) {
    if (row.outcome === 'pending') continue
    const contract = contracts.get(row.runId)
    const config = contract?.providers.find((p) => p.name === row.provider)
    const price = contract === undefined || config === undefined ? undefined : priceOf(contract.pricing, config)
    const lost = unknownCalls === 'reserve' && row.outcome === 'unknown' && row.tokensIn + row.tokensOut === 0
    if (lost && contract !== undefined) {
      const output = reservedOutputTokens(contract) * row.attempts
      tally.add(price, 0, output)
    } else tally.add(price, row.tokensIn, row.tokensOut)
  }
}

/** Whose budget a check holds a call against, and the setting that sets it. */
export interface BudgetSubject {
  /** `the run`, `the run tree`, `this run` (a child's own, lower bound). */
  readonly whose: string
  /** Where the bound is set, for `maxTokens` or `maxCostUsd`: `limits.maxTokens`, `the root's limits.maxTokens`. */
  readonly setting: (limit: 'maxTokens' | 'maxCostUsd') => string
}

/**
 * Which bound a spend of `spending` plus `claim` would pass, as the run's error message;
 * undefined when none. The message is what a user needs to trace the figure: the budget and its
 * setting, what was spent, what the calls in flight reserve, what this call reserves and of what
 * (its prompt's estimate, its answer allowance and the setting that gives it), and which settings
 * let the call go (docs/task-file.md, "Usage and budgets").
 */
export const passedBound = (bounds: Bounds, spending: Spending, claim: Claim, subject: BudgetSubject): string | undefined => {
  const { spent, inFlight } = spending
  const tokens = spent.inputTokens + spent.outputTokens
  const parts = `prompt estimate ${claim.promptTokens} tokens + answer allowance ${claim.answerTokens} tokens from ${claim.answerSetting}${claim.answerDefault ? ` (unset: the default ${DEFAULT_RESERVED_OUTPUT_TOKENS})` : ''}`
  const flying = (amount: string): string =>
    inFlight.calls === 0 ? '' : `, ${amount} reserved by ${inFlight.calls} call${inFlight.calls === 1 ? '' : 's'} of the tree in flight`
  if (bounds.maxTokens !== undefined && tokens + inFlight.tokens + claim.tokens > bounds.maxTokens) {
    const setting = subject.setting('maxTokens')
    return (
      `token budget of ${bounds.maxTokens} (${setting}) for ${subject.whose}: ${tokens} spent${flying(`${inFlight.tokens}`)}, ` +
      `and the next call reserves ${claim.tokens} (${parts}); lower ${claim.answerSetting} or raise ${setting}`
    )
  }
  const usd = spent.costUsd ?? 0
  if (bounds.maxCostUsd !== undefined && usd + inFlight.costUsd + claim.costUsd > bounds.maxCostUsd) {
    const setting = subject.setting('maxCostUsd')
    return (
      `dollar budget of $${bounds.maxCostUsd} (${setting}) for ${subject.whose}: $${roundUsd(usd)} spent${flying(`$${roundUsd(inFlight.costUsd)}`)}, ` +
      `and the next call may cost $${roundUsd(claim.costUsd)} (${parts}, at its model's pricing); lower ${claim.answerSetting} or raise ${setting}`
    )
  }
  return undefined
}
