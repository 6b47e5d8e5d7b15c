// The parts of a task file, each an Effect Schema with the one-line errors of task-contract.ts.
// Apart from task-contract.ts so that agent-spec.ts, which the task file's schema uses, can use them too.
import { Schema } from 'effect'
import { ScriptedStep, TimerMs } from '../provider/scripted-step.js'

// `Schema.Int` is already a safe integer: every count stays exact.
export const PositiveInt = Schema.Int.pipe(Schema.positive())
export const NonNegativeInt = Schema.Int.pipe(Schema.nonNegative())
/** A duration that becomes a timer: Node's timers take at most 2^31-1 ms (docs/task-file.md). */
export const TimerPositiveInt = Schema.Int.pipe(Schema.positive(), TimerMs)
/** Text with something in it besides spaces. */
export const NonBlankString = Schema.String.pipe(Schema.filter((s) => s.trim() !== '' || 'must have non-space text'))
/** Providers are reached over HTTP only: a `file:` or `ftp:` URL would fail every dispatch as transient. */
export const HttpUrl = Schema.String.pipe(
  Schema.filter((s) => {
    try {
      const url = new URL(s)
      if (url.protocol === 'http:' || url.protocol === 'https:') return true
    } catch {
      // not a URL at all: the same answer
    }
    return 'must be an http:// or https:// URL'
  })
)

export const ProviderConfig = Schema.Struct({
  name: Schema.NonEmptyString,
  kind: Schema.Literal('openai', 'anthropic', 'scripted'),
  baseUrl: Schema.optional(HttpUrl),
  model: Schema.optional(Schema.NonEmptyString),
  apiKeyEnv: Schema.optional(Schema.NonEmptyString),
  stream: Schema.optional(Schema.Boolean),
  /** Per-attempt deadline: a provider that hangs longer is aborted and the attempt counts as transient. */
  attemptTimeoutMs: Schema.optional(TimerPositiveInt),
  steps: Schema.optional(Schema.Array(ScriptedStep))
}).pipe(
  Schema.filter((p) => {
    if (p.kind !== 'scripted' && p.model === undefined) {
      return { path: ['model'], message: `is required for a provider of kind "${p.kind}"` }
    }
    if (p.kind === 'scripted' && p.steps === undefined) {
      return { path: ['steps'], message: 'is required for a provider of kind "scripted"' }
    }
    return undefined
  })
)
export type ProviderConfig = typeof ProviderConfig.Type

interface FileTextSpec {
  readonly path: string
  readonly text: string
}
/** What `verifying` checks after each step (docs/task-file.md). */
export type VerifySpec =
  | { readonly fileContains: FileTextSpec }
  | { readonly fileEquals: FileTextSpec }
  | { readonly command: { readonly run: string; readonly exitCode?: number | undefined } }
  | { readonly allOf: ReadonlyArray<VerifySpec> }

const FileText = Schema.Struct({ path: Schema.NonEmptyString, text: Schema.String })
export const VerifySpec: Schema.Schema<VerifySpec> = Schema.Union(
  Schema.Struct({ fileContains: FileText }),
  Schema.Struct({ fileEquals: FileText }),
  Schema.Struct({ command: Schema.Struct({ run: Schema.NonEmptyString, exitCode: Schema.optional(Schema.Int) }) }),
  Schema.Struct({ allOf: Schema.Array(Schema.suspend((): Schema.Schema<VerifySpec> => VerifySpec)) })
)

/** A finite number above zero: an amount of money. */
export const PositiveNumber = Schema.Number.pipe(Schema.finite(), Schema.positive())
const NonNegativeNumber = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

/** At least two: one occurrence or one step is no pattern. */
const AtLeastTwo = Schema.Int.pipe(Schema.greaterThanOrEqualTo(2))

/**
 * Stall detection (docs/task-file.md, "Stalls"): the same tool call `repeats` times within
 * `window` steps, or `window` steps with no new tool result and no new verification outcome,
 * warns the model once, then ends the run `failed` with kind `stalled`. Off when absent.
 */
export const StallLimit = Schema.Struct({ window: Schema.optional(AtLeastTwo), repeats: Schema.optional(AtLeastTwo) })
/** Stall settings as a contract holds them: the defaults filled in. */
export const StoredStallLimit = Schema.Struct({ window: AtLeastTwo, repeats: AtLeastTwo })
export type StallSettings = typeof StoredStallLimit.Type
/** The defaults of `limits.stall: {}` (docs/task-file.md, "Stalls"). */
export const DEFAULT_STALL: StallSettings = { window: 8, repeats: 3 }

/** `limits.stall` as given (validated by `StallLimit`), with the defaults filled in; undefined when off. */
export const stallSettings = (given: typeof StallLimit.Type | undefined): StallSettings | undefined =>
  given === undefined ? undefined : { window: given.window ?? DEFAULT_STALL.window, repeats: given.repeats ?? DEFAULT_STALL.repeats }

export const Limits = Schema.Struct({
  maxSteps: Schema.optional(PositiveInt),
  maxRetries: Schema.optional(NonNegativeInt),
  dispatchCeiling: Schema.optional(PositiveInt),
  timeoutMs: Schema.optional(TimerPositiveInt),
  /** Input plus output tokens the whole run tree may spend (docs/task-file.md, "Budgets"). */
  maxTokens: Schema.optional(PositiveInt),
  /** Dollars the whole run tree may spend, by `pricing`. */
  maxCostUsd: Schema.optional(PositiveNumber),
  /** The prompt a request may send, in estimated tokens: older tool results are elided past it (docs/task-file.md, "Long conversations"). */
  contextTokens: Schema.optional(PositiveInt),
  stall: Schema.optional(StallLimit)
})
/** Limits as a stored contract keeps them: the defaults filled in, budgets still optional. */
export const StoredLimits = Schema.Struct({
  maxSteps: PositiveInt,
  maxRetries: NonNegativeInt,
  dispatchCeiling: PositiveInt,
  timeoutMs: TimerPositiveInt,
  maxTokens: Schema.optional(PositiveInt),
  maxCostUsd: Schema.optional(PositiveNumber),
  contextTokens: Schema.optional(PositiveInt),
  stall: Schema.optional(StoredStallLimit)
})
/** The budget limits: no default, absent means unbounded. */
export type BudgetLimit = 'maxTokens' | 'maxCostUsd'
/** The limits without a default: absent means unbounded. */
export type OptionalLimit = BudgetLimit | 'contextTokens'
/** A contract's limits: the defaults filled in; budgets, `contextTokens` and `stall` absent when off. */
export type Limits = Required<Omit<typeof Limits.Type, OptionalLimit | 'stall'>> &
  Pick<typeof Limits.Type, OptionalLimit> & { readonly stall?: StallSettings | undefined }

/** The defaults of docs/task-file.md ("Limits"). */
export const DEFAULT_LIMITS: Limits = { maxSteps: 10, maxRetries: 2, dispatchCeiling: 50, timeoutMs: 600_000 }

/** What a model's tokens cost, in dollars per million (docs/task-file.md, "pricing"). */
export const ModelPrice = Schema.Struct({ inputPerMTok: NonNegativeNumber, outputPerMTok: NonNegativeNumber })
export type ModelPrice = typeof ModelPrice.Type
/** Prices by model name, as the providers' `model` fields name them. */
export const Pricing = Schema.Record({ key: Schema.NonEmptyString, value: ModelPrice })
export type Pricing = typeof Pricing.Type

const Globs = Schema.Array(Schema.String)
const ActRules = Schema.Struct({ read: Schema.optional(Globs), write: Schema.optional(Globs), exec: Schema.optional(Globs), tool: Schema.optional(Globs) })
export const PolicyLayer = Schema.Struct({
  name: Schema.NonEmptyString,
  allow: Schema.optional(ActRules),
  ask: Schema.optional(ActRules),
  deny: Schema.optional(ActRules)
})
export type PolicyLayer = typeof PolicyLayer.Type

/** Caps on the child runs a run may start with `spawn_child`. */
export const ChildLimits = Schema.Struct({
  /** Children one run may start in all (more are refused to the model). */
  maxChildren: Schema.optional(PositiveInt),
  /** How deep a tree may grow: 1 means children do not spawn. */
  maxDepth: Schema.optional(NonNegativeInt),
  /** Children of one run running at once; more wait their turn (not refused). */
  maxConcurrent: Schema.optional(PositiveInt)
})
export type ChildLimits = Required<typeof ChildLimits.Type>
export const DEFAULT_CHILD_LIMITS: ChildLimits = { maxChildren: 8, maxDepth: 1, maxConcurrent: 4 }

/** Where a run stands in its tree; set by agentvisor for child runs, never in a task file. */
export const Lineage = Schema.Struct({
  rootId: Schema.String,
  parentId: Schema.String,
  depth: PositiveInt,
  /** The root's dispatch ceiling, shared by the whole tree. */
  treeDispatchCeiling: PositiveInt,
  /** The root's token budget, shared by the whole tree; absent when it has none. */
  treeMaxTokens: Schema.optional(PositiveInt),
  /** The root's dollar budget, shared by the whole tree; absent when it has none. */
  treeMaxCostUsd: Schema.optional(PositiveNumber)
})
export type Lineage = typeof Lineage.Type

/** How `exec` and `verify.command` are confined (docs/task-file.md, "sandbox"). */
export const SandboxSpec = Schema.Struct({ exec: Schema.Literal('bwrap', 'none'), network: Schema.optional(Schema.Boolean) }).pipe(
  // `network` is a bubblewrap setting: `"network": false` without it would promise what nothing enforces.
  Schema.filter((s) => (s.exec === 'none' && s.network !== undefined ? { path: ['network'], message: 'applies only with exec "bwrap"' } : undefined))
)
/** A contract's confinement, defaults applied; a contract without one runs its commands unconfined. */
export interface CommandSandbox {
  readonly exec: 'bwrap'
  readonly network: boolean
}

export const ApprovalMode = Schema.Literal('prompt', 'defer', 'auto')
export type ApprovalMode = typeof ApprovalMode.Type
