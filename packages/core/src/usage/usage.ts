import type { ModelPrice, Pricing, ProviderConfig } from '../contract/contract-fields.js'

/**
 * What model calls cost (docs/task-file.md, "Usage and budgets"): tokens as the providers reported
 * them, and dollars by the task's `pricing`. `costUsd` is absent when the task has no `pricing`,
 * or a call was made to a model it has no price for.
 */
export interface Usage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUsd?: number
}

/** The price of a provider's model: undefined when the task names none for it. */
export const priceOf = (pricing: Pricing | undefined, provider: ProviderConfig): ModelPrice | undefined => {
  if (provider.model === undefined) {
    // A scripted double without a model is a local stand-in: it costs nothing.
    return provider.kind === 'scripted' ? FREE : undefined
  }
  return pricing?.[provider.model]
}

const FREE: ModelPrice = { inputPerMTok: 0, outputPerMTok: 0 }

/** Dollars for these tokens at this price. */
export const costOf = (price: ModelPrice, inputTokens: number, outputTokens: number): number =>
  (inputTokens * price.inputPerMTok + outputTokens * price.outputPerMTok) / 1_000_000

/** Cents of cents are noise of floating-point sums: reported figures keep nine decimals. */
export const roundUsd = (usd: number): number => Math.round(usd * 1e9) / 1e9

/**
 * A running total of calls. A call with tokens but no price makes the dollar figure unknown
 * (`costUsd` absent) rather than wrong.
 */
export class UsageTally {
  inputTokens = 0
  outputTokens = 0
  costUsd = 0
  /** False once a call with tokens had no price, or the task has no pricing at all. */
  priced: boolean

  constructor(priced: boolean) {
    this.priced = priced
  }

  add(price: ModelPrice | undefined, inputTokens: number, outputTokens: number): void {
    this.inputTokens += inputTokens
    this.outputTokens += outputTokens
    if (price === undefined) {
      if (inputTokens + outputTokens > 0) this.priced = false
    } else this.costUsd += costOf(price, inputTokens, outputTokens)
  }

  addUsage(usage: Usage): void {
    this.inputTokens += usage.inputTokens
    this.outputTokens += usage.outputTokens
    if (usage.costUsd === undefined) this.priced = false
    else this.costUsd += usage.costUsd
  }

  get usage(): Usage {
    const tokens = { inputTokens: this.inputTokens, outputTokens: this.outputTokens }
    return this.priced ? { ...tokens, costUsd: roundUsd(this.costUsd) } : tokens
  }
}

/** The first provider whose model has no price, for the one-line error of `maxCostUsd` without one. */
export const unpricedProvider = (pricing: Pricing | undefined, providers: ReadonlyArray<ProviderConfig>): ProviderConfig | undefined =>
  providers.find((provider) => priceOf(pricing, provider) === undefined)

/** The tokens a call may spend at most on its answer when its agent sets no `model.maxTokens`. */
export const DEFAULT_RESERVED_OUTPUT_TOKENS = 4096

/**
 * A prompt's tokens as a budget check guesses them before the call, at four characters a token
 * (the usual English average; a budget check may be cautious, never blind).
 */
export const estimateTokens = (characters: number): number => Math.ceil(characters / 4)
