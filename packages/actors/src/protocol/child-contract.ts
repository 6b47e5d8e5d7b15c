import { createHash } from 'node:crypto'
import * as path from 'node:path'
import {
  compilePolicy,
  decodeArgumentsObject,
  DEFAULT_CHILD_LIMITS,
  describeDecision,
  type Limits,
  type OptionalLimit,
  parseChildContract,
  StallLimit,
  type StallSettings,
  stallSettings,
  type TaskContract,
  type VerifySpec,
  quoteName
} from '@agentvisor/core'
import type { NewRun } from '@agentvisor/store'
import { Either, Schema } from 'effect'

/**
 * A child's run id, derived from its parent, step and call position: a parent that resumes and
 * spawns the same call again names the same child, so nothing is started twice.
 */
export const childRunId = (parentId: string, step: number, position: number): string => {
  const hex = createHash('sha256').update(`${parentId}:${step}:${position}`).digest('hex')
  // Shaped like a UUID (version nibble 8: name-based, not random) so ids look alike everywhere.
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${((parseInt(hex.slice(16, 18), 16) & 0x3f) | 0x80).toString(16)}${hex.slice(18, 20)}-${hex.slice(20, 32)}`
}

const narrowLimits = (parent: Limits, asked: unknown): Limits => {
  const wanted = (typeof asked === 'object' && asked !== null ? asked : {}) as Partial<Record<keyof Limits, unknown>>
  const pick = (key: Exclude<keyof Limits, OptionalLimit | 'stall'>): number => {
    const value = wanted[key]
    return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? Math.min(value, parent[key]) : parent[key]
  }
  /** A budget: the smaller of the two; one only the call gives is taken, since the parent had none. */
  const budget = (key: OptionalLimit, isValid: (value: number) => boolean): { [K in OptionalLimit]?: number } => {
    const value = wanted[key]
    const own = typeof value === 'number' && isValid(value) ? value : undefined
    const bound = parent[key]
    const narrowed = own === undefined ? bound : bound === undefined ? own : Math.min(own, bound)
    return narrowed === undefined ? {} : { [key]: narrowed }
  }
  return {
    maxSteps: Math.max(1, pick('maxSteps')),
    maxRetries: pick('maxRetries'),
    dispatchCeiling: Math.max(1, pick('dispatchCeiling')),
    timeoutMs: Math.max(1, pick('timeoutMs')),
    ...budget('maxTokens', (v) => Number.isInteger(v) && v > 0),
    ...budget('maxCostUsd', (v) => Number.isFinite(v) && v > 0),
    ...budget('contextTokens', (v) => Number.isInteger(v) && v > 0),
    ...stallOf(parent.stall, wanted.stall)
  }
}

/**
 * A child's stall setting: its parent's, which binds the whole tree; one the agent or the call
 * gives is taken only where the parent has none (docs/task-file.md, "Stalls").
 */
const stallOf = (parent: StallSettings | undefined, asked: unknown): { stall?: StallSettings } => {
  if (parent !== undefined) return { stall: parent }
  const decoded = Schema.decodeUnknownEither(StallLimit)(asked)
  const settings = Either.isRight(decoded) ? stallSettings(decoded.right) : undefined
  return settings === undefined ? {} : { stall: settings }
}

/** The root's budgets, which bound the whole tree (docs/task-file.md, "Usage and budgets"). */
const treeBudgets = (parent: TaskContract): { treeMaxTokens?: number; treeMaxCostUsd?: number } => {
  const tokens = parent.lineage === undefined ? parent.limits.maxTokens : parent.lineage.treeMaxTokens
  const usd = parent.lineage === undefined ? parent.limits.maxCostUsd : parent.lineage.treeMaxCostUsd
  return { ...(tokens !== undefined ? { treeMaxTokens: tokens } : {}), ...(usd !== undefined ? { treeMaxCostUsd: usd } : {}) }
}

/** Whether `inner` is `outer` or a folder below it (lexically; both are absolute). */
export const isInside = (outer: string, inner: string): boolean => inner === outer || inner.startsWith(outer + path.sep)

const verifyCommands = (spec: VerifySpec | undefined): ReadonlyArray<string> =>
  spec === undefined ? [] : 'command' in spec ? [spec.command.run] : 'allOf' in spec ? spec.allOf.flatMap(verifyCommands) : []

/**
 * A child's `verify` command runs in its workspace like an `exec` does, so the parent's policy
 * must allow it outright (or ask, under `approval: auto`): a child can never do what its parent
 * may not (docs/nats.md). Left: why not.
 */
export const checkVerifyCommands = (
  parent: TaskContract,
  verify: VerifySpec | undefined,
  whose = "the parent's",
  who = 'a child'
): Either.Either<void, string> => {
  const commands = verifyCommands(verify)
  if (commands.length === 0) return Either.void
  const policy = compilePolicy(parent.policy.layers)
  if (Either.isLeft(policy)) return Either.left(`${whose} policy is not valid: ${policy.left.message}`)
  for (const command of commands) {
    const decision = policy.right.check('exec', command)
    if (decision.decision === 'allow' || (decision.decision === 'ask' && parent.approval === 'auto')) continue
    return Either.left(`verify: the command ${describeDecision(decision)} in ${whose} policy, so ${who} may not run it`)
  }
  return Either.void
}

/** Both checks when both are given: a call can add to its delegate's `verify`, never drop it. */
const bothVerified = (own: VerifySpec | undefined, asked: unknown): unknown => (own === undefined ? asked : asked === undefined ? own : { allOf: [own, asked] })

/** The agent fields a child of the caller's own agent keeps: the very same agent. */
const ownAgentFields = (parent: TaskContract): Record<string, unknown> => ({
  ...(parent.agent !== undefined ? { agent: parent.agent } : {}),
  ...(parent.instructions !== undefined ? { instructions: parent.instructions } : {}),
  ...(parent.model !== undefined ? { model: parent.model } : {}),
  ...(parent.tools !== undefined ? { tools: parent.tools } : {}),
  ...(parent.delegates !== undefined ? { delegates: parent.delegates } : {}),
  ...(parent.output !== undefined ? { output: parent.output } : {})
})

/**
 * What a child running the delegate `name` gets of its definition in the task (docs/agents.md,
 * "Delegation"): its providers, instructions, model settings, tools, delegates and output; the
 * parent's policy layers with its own added (they only restrict), limits no larger than either's.
 * Left: why the call is refused.
 */
const delegateFields = (parent: TaskContract, name: unknown, asked: Readonly<Record<string, unknown>>): Either.Either<Record<string, unknown>, string> => {
  if (typeof name !== 'string') return Either.left('Invalid arguments for spawn_child: "agent" must be a string')
  const delegates = parent.delegates ?? []
  const agent = parent.agents?.[name]
  if (!delegates.includes(name) || agent === undefined) {
    const yours = delegates.length === 0 ? 'you have no delegates' : `your delegates are ${delegates.join(', ')}`
    return Either.left(`Refused: ${quoteName(name)} is not an agent you may delegate to (${yours}).`)
  }
  const taken = new Set(parent.policy.layers.map((layer) => layer.name))
  const verify = bothVerified(agent.verify, asked['verify'])
  return Either.right({
    agent: name,
    providers: agent.providers,
    ...(agent.instructions !== undefined ? { instructions: agent.instructions } : {}),
    ...(agent.model !== undefined ? { model: agent.model } : {}),
    ...(agent.tools !== undefined ? { tools: agent.tools } : {}),
    ...(agent.delegates !== undefined ? { delegates: agent.delegates } : {}),
    ...(agent.output !== undefined ? { output: agent.output } : {}),
    // A layer the tree has already (an agent delegating to itself) is not added twice.
    policy: { layers: [...parent.policy.layers, ...(agent.policy?.layers ?? []).filter((layer) => !taken.has(layer.name))] },
    limits: narrowLimits(narrowLimits(parent.limits, agent.limits), asked['limits']),
    ...(verify !== undefined ? { verify } : {})
  })
}

/**
 * A child's contract from its parent's and the few things a child is given (`goal`, `verify`,
 * `limits`, `workspace`, `agent`): everything else, providers and policy first, is the parent's,
 * or the delegate's definition in the task the tree runs (never anything a model wrote).
 */
const buildChild = (parent: TaskContract, parentId: string, args: Readonly<Record<string, unknown>>, ordinal: number): Either.Either<TaskContract, string> => {
  if (typeof args['goal'] !== 'string' || args['goal'].trim() === '') return Either.left('Invalid arguments for spawn_child: "goal" must be a non-empty string')
  const delegated = args['agent'] === undefined ? undefined : delegateFields(parent, args['agent'], args)
  if (delegated !== undefined && Either.isLeft(delegated)) return Either.left(delegated.left)
  const folder = args['workspace'] === undefined ? `children/${ordinal}` : args['workspace']
  if (typeof folder !== 'string') return Either.left('Invalid arguments for spawn_child: "workspace" must be a string')
  const workspace = path.resolve(parent.workspace, folder)
  if (path.isAbsolute(folder) || !isInside(parent.workspace, workspace)) {
    return Either.left(`Path escapes the workspace boundary: ${folder}`)
  }
  const lineage = {
    rootId: parent.lineage?.rootId ?? parentId,
    parentId,
    depth: (parent.lineage?.depth ?? 0) + 1,
    treeDispatchCeiling: parent.lineage?.treeDispatchCeiling ?? parent.limits.dispatchCeiling,
    ...treeBudgets(parent)
  }
  const candidate = {
    goal: args['goal'],
    workspace,
    providers: parent.providers,
    ...(args['verify'] !== undefined ? { verify: args['verify'] } : {}),
    limits: narrowLimits(parent.limits, args['limits']),
    policy: parent.policy,
    // Nobody sits at a worker's terminal: a child's asks wait for `approve` instead.
    approval: parent.approval === 'prompt' ? 'defer' : parent.approval,
    children: parent.children ?? DEFAULT_CHILD_LIMITS,
    // The parent's confinement, as is: nothing in the call can loosen it (docs/task-file.md, "sandbox").
    ...(parent.sandbox !== undefined ? { sandbox: parent.sandbox } : {}),
    lineage,
    ...(parent.pricing !== undefined ? { pricing: parent.pricing } : {}),
    // The tree's agents, tool modules and MCP servers travel with every contract of it (a worker loads them).
    ...(parent.agents !== undefined ? { agents: parent.agents } : {}),
    ...(parent.toolModules !== undefined ? { toolModules: parent.toolModules } : {}),
    ...(parent.mcpServers !== undefined ? { mcpServers: parent.mcpServers } : {}),
    ...(delegated === undefined ? ownAgentFields(parent) : delegated.right)
  }
  // The internal entry: a child's contract carries the lineage only agentvisor may set.
  const parsed = Either.mapLeft(parseChildContract(candidate, parent.workspace), (error) => `Invalid arguments for spawn_child: ${error.message}`)
  return Either.flatMap(parsed, (child) => Either.map(checkVerifyCommands(parent, child.verify), () => child))
}

/**
 * The contract of a child run from a `spawn_child` call: the parent's providers, policy and
 * sandbox (a child can never do what its parent may not), limits no larger than the parent's, and a
 * workspace inside the parent's (`children/<n>` by default). Left: why the call is refused.
 */
export const childContract = (parent: TaskContract, parentId: string, rawArguments: string, ordinal: number): Either.Either<TaskContract, string> => {
  // The same decoding as every tool's: a non-object or too deeply nested call is refused here.
  const decoded = decodeArgumentsObject(rawArguments)
  if (Either.isLeft(decoded)) return Either.left(`Invalid arguments for spawn_child: ${decoded.left}`)
  return buildChild(parent, parentId, decoded.right, ordinal)
}

/** JSON text with keys sorted and `undefined` fields gone: equal values compare equal however they were built. */
export const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, field: unknown) =>
    field !== null && typeof field === 'object' && !Array.isArray(field)
      ? Object.fromEntries(
          Object.entries(field)
            .filter(([, v]) => v !== undefined)
            .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        )
      : field
  ) ?? 'undefined'

export const same = (a: unknown, b: unknown): boolean => canonical(a) === canonical(b)

// The fields a child-run request may choose (within the parent's bounds); every other field of
// the contract must be exactly what the parent's contract gives a child, so a field added to
// task files later cannot widen a child without this list saying how it narrows.
const CHOSEN_BY_THE_REQUEST: ReadonlySet<string> = new Set(['goal', 'workspace', 'verify', 'limits', 'policy', 'approval', 'children'])

/** A limit the parent bounds and the request leaves out (a budget) is unbounded: above it too. */
export const numbersAbove = <K extends string>(
  what: string,
  asked: Readonly<Partial<Record<K, unknown>>>,
  bound: Readonly<Partial<Record<K, unknown>>>,
  whose = "the parent's"
): string | undefined => {
  for (const key of Object.keys(bound) as K[]) {
    const limit = bound[key]
    if (typeof limit !== 'number') continue
    const value = asked[key]
    if (value === undefined) return `${what}.${key}: unbounded where ${whose} is ${limit}`
    if (typeof value === 'number' && value > limit) return `${what}.${key}: ${value} is above ${whose} ${limit}`
  }
  return undefined
}

/**
 * Why `asked`'s limits go past `bound`'s: a number above its bound, or a stall setting other than
 * the bound's (a tree's `limits.stall` is its author's: docs/task-file.md, "Stalls").
 */
export const limitsAbove = (asked: Limits, bound: Limits, whose = "the parent's"): string | undefined => {
  const above = numbersAbove('limits', asked, bound, whose)
  if (above !== undefined || bound.stall === undefined || same(asked.stall, bound.stall)) return above
  return asked.stall === undefined
    ? `limits.stall: off where ${whose} is ${canonical(bound.stall)}`
    : `limits.stall: ${canonical(asked.stall)} differs from ${whose} ${canonical(bound.stall)}`
}

/**
 * The index of the first layer from `from` on with an `allow` rule, or -1. Across layers the
 * strongest tier wins (docs/policy.md): added ask and deny rules can only restrict, an allow rule
 * could turn an inherited ask into an allow.
 */
export const firstAllowingLayer = (layers: TaskContract['policy']['layers'], from: number): number =>
  layers.findIndex((layer, index) => index >= from && layer.allow !== undefined && Object.values(layer.allow).some((rules) => (rules?.length ?? 0) > 0))

/** Why `child` (validated) would do more than `rebuilt`, the parent's own child contract, allows. */
const widening = (parent: TaskContract, parentId: string, rebuilt: TaskContract, child: TaskContract): string | undefined => {
  for (const key of new Set([...Object.keys(child), ...Object.keys(rebuilt)])) {
    if (CHOSEN_BY_THE_REQUEST.has(key)) continue
    const asked = (child as unknown as Record<string, unknown>)[key]
    const given = (rebuilt as unknown as Record<string, unknown>)[key]
    if (same(asked, given)) continue
    if (key === 'providers') return "providers: a child uses its parent's providers (the same kinds, models, baseUrls and apiKeyEnv names)"
    if (key === 'lineage') return `lineage: a child of ${parentId} has ${canonical(rebuilt.lineage)}`
    return `${key}: differs from what the parent's contract gives a child`
  }
  // What the parent's contract gives this child: for a delegate, its definition's limits and layers too.
  const limits = limitsAbove(child.limits, rebuilt.limits) ?? numbersAbove('children', child.children, parent.children ?? DEFAULT_CHILD_LIMITS)
  if (limits !== undefined) return limits
  if (child.approval === 'auto' && parent.approval !== 'auto') return `approval: "auto" is weaker than the parent's "${parent.approval}"`
  const inherited = rebuilt.policy.layers
  if (!same(child.policy.layers.slice(0, inherited.length), inherited)) {
    return `policy.layers: must begin with the parent's ${inherited.length} layer${inherited.length === 1 ? '' : 's'} unchanged`
  }
  const widened = firstAllowingLayer(child.policy.layers, inherited.length)
  if (widened !== -1) return `policy.layers.${widened}.allow: a child may only add ask and deny rules to its parent's policy`
  return undefined
}

/**
 * Checks a child-run request from a bus against its parent's stored contract and returns the
 * contract to drive: the parent's own child contract (what `spawn_child` would build from the
 * request's goal, verify, limits and workspace), with the request's extra restrictions kept
 * (ask/deny policy layers, lower children caps, `defer` instead of `auto`). Anything that would
 * widen it (providers, baseUrls, apiKeyEnv names, policy, a workspace outside the parent's,
 * limits, caps, approval, lineage) is refused: Left names the field (docs/nats.md).
 */
export const narrowChildRequest = (parent: TaskContract, parentId: string, asked: unknown): Either.Either<TaskContract, string> => {
  const parsed = parseChildContract(asked, parent.workspace)
  if (Either.isLeft(parsed)) return Either.left(`contract: ${parsed.left.message}`)
  const child = parsed.right
  if (!isInside(parent.workspace, child.workspace)) return Either.left(`workspace: ${child.workspace} is not inside the parent's workspace ${parent.workspace}`)
  const folder = path.relative(parent.workspace, child.workspace)
  const request = { goal: child.goal, workspace: folder === '' ? '.' : folder, verify: child.verify, limits: child.limits }
  const rebuilt = buildChild(parent, parentId, child.agent === undefined ? request : { ...request, agent: child.agent }, 0)
  if (Either.isLeft(rebuilt)) return Either.left(rebuilt.left.replace(/^Invalid arguments for spawn_child: /, ''))
  const widened = widening(parent, parentId, rebuilt.right, child)
  if (widened !== undefined) return Either.left(widened)
  return Either.right({
    ...rebuilt.right,
    policy: child.policy,
    approval: child.approval === 'prompt' ? 'defer' : child.approval,
    children: child.children
  })
}

/**
 * The row of a new child run, about to be driven. Its parent is in the same store (workers share
 * their parents' store, docs/deploy.md); `null` only for rows built without one (tests).
 */
export const childRunRow = (id: string, parentId: string | null, contract: TaskContract, at: string): NewRun => ({
  id,
  parent_id: parentId,
  root_id: contract.lineage?.rootId ?? parentId,
  status: 'running',
  goal: contract.goal,
  contract_json: JSON.stringify(contract),
  state: 'dispatching',
  error_json: null,
  created_at: at,
  updated_at: at,
  ended_at: null
})
