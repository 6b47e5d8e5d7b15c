import * as path from 'node:path'
import { quoteName, revealHidden } from '../contract/quote-name.js'
import { Either, Schema } from 'effect'
import type { PolicyLayer } from '../contract/contract-fields.js'
import { ContractError } from '../errors.js'
import { analyzeCommand, type RiskyConstruct } from './command-line.js'
import { commandReadings } from './command-readings.js'
import { compileGlob, GlobMode, type GlobMatcher } from './glob.js'

/**
 * What a tool call does: read a path, write a path, run a command line (the built-in tools), or
 * call a tool by name (every tool of a tool module or an MCP server, docs/policy.md).
 */
export const Act = { read: 'read', write: 'write', exec: 'exec', tool: 'tool' } as const
export type Act = (typeof Act)[keyof typeof Act]

/** A policy's answer, weakest to strongest. */
export const Tier = { allow: 'allow', ask: 'ask', deny: 'deny' } as const
export type Tier = (typeof Tier)[keyof typeof Tier]

const ACTS: ReadonlyArray<Act> = [Act.read, Act.write, Act.exec, Act.tool]
/** Strongest first: the order rules are listed in an explanation within one layer. */
const TIERS: ReadonlyArray<Tier> = [Tier.deny, Tier.ask, Tier.allow]
const STRENGTH: Readonly<Record<Tier, number>> = { allow: 0, ask: 1, deny: 2 }

/**
 * Layer names the engine itself attributes decisions to. A task's layers may not use them, so a
 * recorded decision always points at exactly one source.
 */
export const PolicySource = {
  /** No rule covered the act. */
  default: 'default',
  /** The engine's own guard: workspace escapes, empty commands, risky shell constructs. */
  sandbox: 'sandbox',
  /** Decisions remembered from earlier runs of the same workspace (`approve --remember`). */
  remembered: 'remembered'
} as const
export type PolicySource = (typeof PolicySource)[keyof typeof PolicySource]
const RESERVED_LAYER_NAMES: ReadonlySet<string> = new Set(Object.values(PolicySource))

/** Rule names for decisions no glob made. */
export const SandboxRule = { default: 'default', workspace: 'workspace', emptyCommand: 'empty-command' } as const

/**
 * What the policy decided about one act, and why: the deciding glob (`rule`) and the layer it
 * came from. Recorded for every refusal and every decision.
 */
export interface PolicyDecision {
  readonly decision: Tier
  readonly rule: string
  readonly layer: string
  readonly act: Act
  /** The normalised workspace-relative path, or the command line (trimmed). */
  readonly target: string
  readonly reason?: string | undefined
}

/** One rule that matched, in evaluation order. */
export interface PolicyMatch {
  readonly tier: Tier
  readonly rule: string
  readonly layer: string
  /** For `exec`: the segment of the command line the rule matched. */
  readonly segment?: string | undefined
}

/** For `exec`: how each segment of the command line was judged on its own. */
export interface SegmentVerdict {
  readonly segment: string
  readonly decision: Tier
  readonly rule: string
  readonly layer: string
}

/** The decision together with everything that led to it. */
export interface PolicyExplanation {
  readonly decision: PolicyDecision
  /** Every matching rule: segment by segment, then layer by layer, deny before ask before allow, then as written. */
  readonly matches: ReadonlyArray<PolicyMatch>
  /** `exec` only (empty otherwise). */
  readonly segments: ReadonlyArray<SegmentVerdict>
  /** `exec` only (empty otherwise): constructs that keep the command from being auto-allowed. */
  readonly risky: ReadonlyArray<RiskyConstruct>
}

/**
 * A decision a user asked to keep (`approve --remember`) for later runs of the same workspace.
 * Stored as data, so it has a schema the store can decode with.
 */
export const RememberedRule = Schema.Struct({
  act: Schema.Literal(Act.read, Act.write, Act.exec, Act.tool),
  pattern: Schema.NonEmptyString,
  decision: Schema.Literal(Tier.allow, Tier.deny)
})
export type RememberedRule = typeof RememberedRule.Type

/** A validated policy. `check` is `explain(...).decision`: one code path decides and explains. */
export interface CompiledPolicy {
  /** The layer names in evaluation order (`remembered` last when present). */
  readonly layers: ReadonlyArray<string>
  /**
   * `unruled`: the answer when no rule covers the act. Only `tool` takes it (the tool's effect
   * class decides: `read` tools are allowed, the others ask); the built-in acts keep their own.
   */
  readonly check: (act: Act, target: string, unruled?: Tier) => PolicyDecision
  readonly explain: (act: Act, target: string, unruled?: Tier) => PolicyExplanation
}

interface CompiledRule {
  readonly tier: Tier
  readonly pattern: string
  readonly layer: string
  readonly matches: GlobMatcher
}

interface CompiledLayer {
  readonly name: string
  /** Per act, the rules deny first, then ask, then allow, each tier as written. */
  readonly rules: Readonly<Record<Act, ReadonlyArray<CompiledRule>>>
}

type RuleSource = { readonly layer: string; readonly tier: Tier; readonly act: Act; readonly pattern: string; readonly field: string }

const compileRules = (sources: ReadonlyArray<RuleSource>): Either.Either<ReadonlyArray<CompiledRule & { readonly act: Act }>, ContractError> => {
  const compiled: Array<CompiledRule & { readonly act: Act }> = []
  for (const source of sources) {
    const glob = compileGlob(source.pattern, source.act === Act.exec ? GlobMode.command : GlobMode.path)
    if (Either.isLeft(glob)) {
      return Either.left(
        new ContractError({
          field: source.field,
          message: `${source.field}: invalid glob ${quoteName(source.pattern)}: ${glob.left.message}`
        })
      )
    }
    compiled.push({ tier: source.tier, pattern: source.pattern, layer: source.layer, act: source.act, matches: glob.right })
  }
  return Either.right(compiled)
}

const buildLayer = (name: string, rules: ReadonlyArray<CompiledRule & { readonly act: Act }>): CompiledLayer => {
  const byAct = (act: Act): ReadonlyArray<CompiledRule> => TIERS.flatMap((tier) => rules.filter((rule) => rule.act === act && rule.tier === tier))
  return { name, rules: { read: byAct(Act.read), write: byAct(Act.write), exec: byAct(Act.exec), tool: byAct(Act.tool) } }
}

/** Where a path lands inside the workspace, or undefined when it leaves it. */
const normaliseWorkspacePath = (target: string): string | undefined => {
  if (path.posix.isAbsolute(target)) return undefined
  const normalised = path.posix.normalize(target === '' ? '.' : target).replace(/\/+$/, '')
  if (normalised === '..' || normalised.startsWith('../')) return undefined
  return normalised === '' ? '.' : normalised
}

const strongest = (tiers: Iterable<Tier>): Tier | undefined => {
  let best: Tier | undefined
  for (const tier of tiers) if (best === undefined || STRENGTH[tier] > STRENGTH[best]) best = tier
  return best
}

/** Every rule of `act` that matches, layer by layer. Restricting rules also see the looser readings. */
const matchesOf = (layers: ReadonlyArray<CompiledLayer>, act: Act, subject: string, readings: ReadonlyArray<string>): PolicyMatch[] => {
  const found: PolicyMatch[] = []
  for (const layer of layers) {
    for (const rule of layer.rules[act]) {
      const hit = rule.tier === Tier.allow ? rule.matches(subject) : readings.some((reading) => rule.matches(reading))
      if (hit) found.push({ tier: rule.tier, rule: rule.pattern, layer: layer.name, ...(act === Act.exec ? { segment: subject } : {}) })
    }
  }
  return found
}

/** The strongest tier wins; among its matches the first in layer order decides. */
const decide = (matches: ReadonlyArray<PolicyMatch>): PolicyMatch | undefined => {
  const tier = strongest(matches.map((match) => match.tier))
  return matches.find((match) => match.tier === tier)
}

const describeRisk = (risk: RiskyConstruct): string =>
  risk.kind === 'unparsed'
    ? `the command could not be parsed from ${JSON.stringify(risk.text)} on and is never auto-allowed`
    : `${risk.kind} ${JSON.stringify(risk.text)} is never auto-allowed`

const explainPath = (layers: ReadonlyArray<CompiledLayer>, act: Act, target: string): PolicyExplanation => {
  const normalised = normaliseWorkspacePath(target)
  if (normalised === undefined) {
    return {
      decision: { decision: Tier.deny, rule: SandboxRule.workspace, layer: PolicySource.sandbox, act, target, reason: 'Path escapes the workspace boundary' },
      matches: [],
      segments: [],
      risky: []
    }
  }
  const matches = matchesOf(layers, act, normalised, [normalised])
  const winner = decide(matches)
  const decision: PolicyDecision =
    winner !== undefined
      ? { decision: winner.tier, rule: winner.rule, layer: winner.layer, act, target: normalised }
      : {
          decision: act === Act.read ? Tier.allow : Tier.ask,
          rule: SandboxRule.default,
          layer: PolicySource.default,
          act,
          target: normalised,
          ...(act === Act.read ? {} : { reason: `no rule covers ${act} of this path` })
        }
  return { decision, matches, segments: [], risky: [] }
}

/** A call of a tool by name: its globs match the name (`docs__*`); no rule gives `unruled`. */
const explainTool = (layers: ReadonlyArray<CompiledLayer>, name: string, unruled: Tier): PolicyExplanation => {
  const matches = matchesOf(layers, Act.tool, name, [name])
  const winner = decide(matches)
  const decision: PolicyDecision =
    winner !== undefined
      ? { decision: winner.tier, rule: winner.rule, layer: winner.layer, act: Act.tool, target: name }
      : {
          decision: unruled,
          rule: SandboxRule.default,
          layer: PolicySource.default,
          act: Act.tool,
          target: name,
          ...(unruled === Tier.allow ? {} : { reason: 'no rule covers this tool' })
        }
  return { decision, matches, segments: [], risky: [] }
}

const explainCommand = (layers: ReadonlyArray<CompiledLayer>, command: string): PolicyExplanation => {
  const target = command.trim()
  const { segments, risky } = analyzeCommand(target)
  if (segments.length === 0) {
    return {
      decision: { decision: Tier.deny, rule: SandboxRule.emptyCommand, layer: PolicySource.sandbox, act: Act.exec, target, reason: 'the command is empty' },
      matches: [],
      segments: [],
      risky
    }
  }
  const matches: PolicyMatch[] = []
  const verdicts: SegmentVerdict[] = []
  for (const segment of segments) {
    const found = matchesOf(layers, Act.exec, segment, commandReadings(segment))
    matches.push(...found)
    const winner = decide(found)
    verdicts.push(
      winner !== undefined
        ? { segment, decision: winner.tier, rule: winner.rule, layer: winner.layer }
        : { segment, decision: Tier.ask, rule: SandboxRule.default, layer: PolicySource.default }
    )
  }
  // Across segments the strongest verdict wins; the first segment with it decides.
  const tier = strongest(verdicts.map((verdict) => verdict.decision))
  const deciding = verdicts.find((verdict) => verdict.decision === tier)!
  const [firstRisk] = risky
  let decision: PolicyDecision
  if (deciding.decision === Tier.allow && firstRisk !== undefined) {
    // Rules judge command text; a redirection or substitution acts beyond it, so it asks.
    decision = { decision: Tier.ask, rule: firstRisk.kind, layer: PolicySource.sandbox, act: Act.exec, target, reason: describeRisk(firstRisk) }
  } else {
    const reason =
      deciding.layer === PolicySource.default
        ? `no rule covers segment ${JSON.stringify(deciding.segment)}`
        : segments.length > 1 || deciding.segment !== target
          ? `segment ${JSON.stringify(deciding.segment)}`
          : undefined
    decision = {
      decision: deciding.decision,
      rule: deciding.rule,
      layer: deciding.layer,
      act: Act.exec,
      target,
      ...(reason !== undefined ? { reason } : {})
    }
  }
  return { decision, matches, segments: verdicts, risky }
}

/**
 * Validates a task's policy layers (and the workspace's remembered decisions) once and returns
 * the compiled policy the run machine consults before every tool call.
 *
 * Across all layers deny beats ask beats allow; the deciding rule is the first match of the
 * winning tier in layer order. Uncovered acts are `ask` for write and exec, `allow` for read.
 * Remembered rules form a last layer named `remembered` judged like any other, so a remembered
 * allow never beats a deny and a remembered deny always wins.
 *
 * Fails with a `ContractError` naming the field (`policy.layers.1.deny.write.0: invalid glob
 * "{a": ...`) for an invalid glob, a duplicate layer name, or a reserved one (`default`,
 * `sandbox`, `remembered`).
 *
 * @example
 * const policy = Either.getOrThrow(compilePolicy([{ name: 'base', deny: { write: ['secrets/**'] } }]))
 * policy.check('write', 'secrets/key.txt') // { decision: 'deny', rule: 'secrets/**', layer: 'base', ... }
 */
export const compilePolicy = (
  layers: ReadonlyArray<PolicyLayer>,
  remembered: ReadonlyArray<RememberedRule> = []
): Either.Either<CompiledPolicy, ContractError> => {
  const seen = new Set<string>()
  const compiledLayers: CompiledLayer[] = []
  for (const [index, layer] of layers.entries()) {
    const field = `policy.layers.${index}.name`
    if (RESERVED_LAYER_NAMES.has(layer.name)) {
      return Either.left(new ContractError({ field, message: `${field}: ${quoteName(layer.name)} is reserved for the policy engine's own decisions` }))
    }
    if (seen.has(layer.name)) {
      return Either.left(new ContractError({ field, message: `${field}: duplicates layer name ${quoteName(layer.name)}` }))
    }
    seen.add(layer.name)
    const sources: RuleSource[] = []
    for (const tier of TIERS) {
      for (const act of ACTS) {
        for (const [ruleIndex, pattern] of (layer[tier]?.[act] ?? []).entries()) {
          sources.push({ layer: layer.name, tier, act, pattern, field: `policy.layers.${index}.${tier}.${act}.${ruleIndex}` })
        }
      }
    }
    const rules = compileRules(sources)
    if (Either.isLeft(rules)) return Either.left(rules.left)
    compiledLayers.push(buildLayer(layer.name, rules.right))
  }

  if (remembered.length > 0) {
    const sources: RuleSource[] = []
    for (const [index, rule] of remembered.entries()) {
      // Remembered rules come from the store, not the type checker: check what TS cannot see.
      if (!ACTS.includes(rule.act) || (rule.decision !== Tier.allow && rule.decision !== Tier.deny)) {
        const field = `remembered.${index}`
        return Either.left(new ContractError({ field, message: `${field}: expected an act of read, write, exec or tool and a decision of allow or deny` }))
      }
      sources.push({ layer: PolicySource.remembered, tier: rule.decision, act: rule.act, pattern: rule.pattern, field: `remembered.${index}.pattern` })
    }
    const rules = compileRules(sources)
    if (Either.isLeft(rules)) return Either.left(rules.left)
    compiledLayers.push(buildLayer(PolicySource.remembered, rules.right))
  }

  const explain = (act: Act, target: string, unruled: Tier = Tier.ask): PolicyExplanation =>
    act === Act.exec
      ? explainCommand(compiledLayers, target)
      : act === Act.tool
        ? explainTool(compiledLayers, target, unruled)
        : explainPath(compiledLayers, act, target)
  return Either.right({
    layers: compiledLayers.map((layer) => layer.name),
    explain,
    check: (act, target, unruled) => explain(act, target, unruled).decision
  })
}

/** Paths print bare unless they hold blanks, quotes or characters a reader cannot see (then quoted as every name is); commands always quoted. */
const printTarget = (decision: PolicyDecision): string =>
  decision.act === Act.exec || quoteName(decision.target) !== `"${decision.target}"` || /[\s']/u.test(decision.target) || decision.target === ''
    ? revealHidden(JSON.stringify(decision.target))
    : decision.target

/**
 * One line for a human or the model: `write secrets/key.txt refused by rule "secrets/**" in layer "base"`.
 */
export const describeDecision = (decision: PolicyDecision): string => {
  const by = `rule ${quoteName(decision.rule)} in layer ${quoteName(decision.layer)}`
  const verb = decision.decision === Tier.deny ? `refused by ${by}` : decision.decision === Tier.ask ? `needs approval under ${by}` : `allowed by ${by}`
  const reason = decision.reason !== undefined ? ` (${decision.reason})` : ''
  return `${decision.act} ${printTarget(decision)} ${verb}${reason}`
}
