import type { ProviderConfig } from '../contract/contract-fields.js'

/** A link of a fallback chain in the TS API: a provider, or a nested chain of them. */
export type FallbackLink = ProviderConfig | ReadonlyArray<FallbackLink>

/**
 * Builds a fallback chain from providers and nested chains, flattened depth-first: the order is
 * the order providers are asked in a step. `fallback(a, fallback(b, c))` is `[a, b, c]`.
 *
 * @example
 * providers: fallback(primary, fallback(secondary, tertiary))
 */
export const fallback = (...links: ReadonlyArray<FallbackLink>): ProviderConfig[] => flattenChain(links) as ProviderConfig[]

/** Flattens nested arrays of providers; anything else is returned as is for validation to judge. */
export const flattenChain = (value: unknown): unknown =>
  Array.isArray(value) ? value.flatMap((link) => (Array.isArray(link) ? (flattenChain(link) as unknown[]) : [link])) : value
