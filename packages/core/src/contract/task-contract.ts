import { fieldPathText, quoteName } from './quote-name.js'
import { realpathSync } from 'node:fs'
import { homedir } from 'node:os'
import * as path from 'node:path'
import { Either, ParseResult, Schema } from 'effect'
import { ContractError } from '../errors.js'
import { checkedTaskFile } from './contract-check.js'
import { TaskFile, type TaskContract } from './task-shape.js'
import { compilePolicy } from '../policy/policy.js'
import { DEFAULT_CHILD_LIMITS, DEFAULT_LIMITS, type Limits, stallSettings } from './contract-fields.js'
import { unpricedProvider } from '../usage/usage.js'
import { isStackOverflow, MAX_NESTING_DEPTH, valueTooDeepAt } from './nesting.js'
import { isHttpServer } from '../tools/mcp/mcp-server-spec.js'
import { agentDefinitions, checkAgents } from './agent-spec.js'

// 'all': a union (`verify`) reports each member's issue, and the deepest one is the one meant.
const decodeTaskFile = Schema.decodeUnknownEither(TaskFile, { errors: 'all', onExcessProperty: 'error' })

const describeValue = (value: unknown): string =>
  value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value === 'object' ? 'an object' : `a ${typeof value}`

const valueAt = (input: unknown, at: ReadonlyArray<PropertyKey>): unknown => {
  let value = input
  for (const key of at) value = typeof value === 'object' && value !== null ? (value as Record<PropertyKey, unknown>)[key] : undefined
  return value
}

/**
 * Turns Effect's parse issue into one line naming the field: `limits.maxSteps: Expected an integer, actual 1.5`.
 * Effect describes a wrong value's expected type by printing the type, which for an object is the
 * whole schema (thousands of characters): those say what kind of value was expected instead.
 */
const LITERAL = /^Expected ("(?:[^"\\]|\\.)*"), actual (.*)$/

/**
 * A value outside a set of literals (a union of them, or of structs told apart by one) as the
 * whole set: `must be one of "openai", "anthropic", "scripted", got "opena"`, not the first
 * alternative alone.
 */
const oneOf = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>, issue: ParseResult.ArrayFormatterIssue): string | undefined => {
  const got = LITERAL.exec(issue.message)
  if (got === null) return undefined
  const key = issue.path.map(String).join('.')
  const allowed = new Set<string>()
  for (const candidate of issues) {
    const match = candidate.path.map(String).join('.') === key ? LITERAL.exec(candidate.message) : null
    if (match !== null) allowed.add(match[1]!)
  }
  return allowed.size < 2 ? `must be ${[...allowed][0]}, got ${got[2]}` : `must be one of ${[...allowed].join(', ')}, got ${got[2]}`
}

const describeIssue = (error: ParseResult.ParseError, input: unknown): { field: string; message: string } => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  let issue = issues[0]
  for (const candidate of issues) if (issue !== undefined && candidate.path.length > issue.path.length) issue = candidate
  if (issue === undefined) return { field: '', message: error.message.split('\n')[0]! }
  let at: ReadonlyArray<PropertyKey> = issue.path
  let detail: string
  const parent = valueAt(input, at.slice(0, -1))
  if (issue._tag === 'Unexpected') detail = 'is not a known field'
  else if (issue._tag === 'Missing' && Array.isArray(parent) && parent.length === 0) {
    at = at.slice(0, -1)
    detail = 'must not be empty'
  } else if (issue.message.startsWith('Expected {')) detail = `must be an object, got ${describeValue(valueAt(input, at))}`
  else if (issue.message.startsWith('Expected ReadonlyArray<') || issue.message.startsWith('Expected readonly ['))
    detail = `must be a list, got ${describeValue(valueAt(input, at))}`
  else detail = oneOf(issues, issue) ?? issue.message.split('\n')[0]!
  const field = at.map(String).join('.')
  return { field, message: field === '' ? detail : `${fieldPathText(at)}: ${detail}` }
}

/** Why a task cannot even be decoded: not an object, or nested past the limit (checked without recursion). */
const checkShape = (input: unknown, source: string | undefined): ContractError | undefined => {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    const got = input === undefined || input === null ? 'nothing' : describeValue(input)
    return new ContractError({ message: `the task must be an object with goal, workspace and providers, got ${got}`, source })
  }
  const tooDeep = valueTooDeepAt(input, MAX_NESTING_DEPTH)
  if (tooDeep !== undefined) {
    const field = tooDeep[0]!
    return new ContractError({ message: `${field}: nests deeper than ${MAX_NESTING_DEPTH} levels of objects and lists (the most a task may)`, field, source })
  }
  return undefined
}

/**
 * Folders a run may never have as its workspace: the filesystem root and the user's home (as
 * given, resolved, and as its real path). A whole disk or home folder handed to a model is never
 * what a task means (docs/task-file.md).
 */
const refusedWorkspace = (workspace: string): string | undefined => {
  const real = (p: string): string => {
    try {
      return realpathSync(p)
    } catch {
      return p
    }
  }
  const home = path.resolve(homedir())
  for (const candidate of new Set([workspace, real(workspace)])) {
    if (path.parse(candidate).root === candidate) return 'is the filesystem root'
    if (candidate === home || candidate === real(home)) return 'is your home folder'
  }
  return undefined
}

/** The fields only agentvisor writes, and on what. */
const AGENTVISOR_FIELDS = [
  ['lineage', 'for child runs'],
  ['agent', 'for child runs'],
  ['startedWithTools', 'on the runs it stores']
] as const

/**
 * Validates an already-parsed task (a task file's content or a TS object). Relative workspace paths
 * resolve against `baseDir` (the task file's folder, or the cwd for the TS API). `lineage` is
 * refused: only agentvisor sets it, on the child contracts it builds (`parseChildContract`).
 */
export const parseTaskContract = (input: unknown, baseDir: string, source?: string): Either.Either<TaskContract, ContractError> => {
  if (typeof input === 'object' && input !== null) {
    for (const [field, by] of AGENTVISOR_FIELDS) {
      if ((input as Record<string, unknown>)[field] === undefined) continue
      return Either.left(new ContractError({ message: `${field}: is set by agentvisor ${by} and is not allowed in a task`, field, source }))
    }
  }
  return parseContract(input, baseDir, source)
}

/**
 * `parseTaskContract` for the contracts agentvisor builds itself (a child run's, from `spawn_child`
 * or off the bus): the only entry that accepts `lineage`, the tree's shared ceiling.
 */
export const parseChildContract = (input: unknown, baseDir: string): Either.Either<TaskContract, ContractError> => parseContract(input, baseDir, undefined)

const parseContract = (input: unknown, baseDir: string, source: string | undefined): Either.Either<TaskContract, ContractError> => {
  const shapeError = checkShape(input, source)
  if (shapeError !== undefined) return Either.left(shapeError)
  let decoded: Either.Either<TaskContract, ContractError>
  try {
    decoded = decodeContract(input, baseDir, source)
  } catch (error) {
    // The depth check above keeps decoding shallow; this keeps any overflow left one line too.
    if (!isStackOverflow(error)) throw error
    return Either.left(new ContractError({ message: `the task nests too deeply (at most ${MAX_NESTING_DEPTH} levels)`, source }))
  }
  return Either.flatMap(decoded, (contract) => {
    const refused = refusedWorkspace(contract.workspace)
    if (refused === undefined) return Either.right(contract)
    return Either.left(
      new ContractError({ message: `workspace: ${contract.workspace} ${refused}; give the run a folder of its own`, field: 'workspace', source })
    )
  })
}

const decodeContract = (input: unknown, baseDir: string, source: string | undefined): Either.Either<TaskContract, ContractError> => {
  // The common shapes are checked by hand (contract-check.ts); the Schema judges the rest and says what is wrong.
  const checked = checkedTaskFile(input)
  return Either.match(checked !== undefined ? Either.right(checked) : decodeTaskFile(input), {
    onLeft: (error) => {
      const { field, message } = describeIssue(error, input)
      return Either.left(new ContractError({ message, field, source }))
    },
    onRight: (file) => {
      // Globs are compiled here too, so a bad rule stops the task before any run exists.
      const policy = compilePolicy(file.policy?.layers ?? [])
      if (Either.isLeft(policy)) return Either.left(new ContractError({ message: policy.left.message, field: policy.left.field, source }))
      const agentsError = checkAgents(file, source)
      if (agentsError !== undefined) return Either.left(agentsError)
      const budgetError = checkPricing(file, source)
      if (budgetError !== undefined) return Either.left(budgetError)
      if (file.agent !== undefined && file.agents?.[file.agent] === undefined) {
        return Either.left(new ContractError({ message: `agent: unknown agent ${quoteName(file.agent)}`, field: 'agent', source }))
      }
      return Either.right<TaskContract>({
        goal: file.goal,
        workspace: path.resolve(baseDir, file.workspace),
        providers: file.providers,
        verify: file.verify,
        limits: limitsOf(file.limits),
        policy: file.policy ?? { layers: [] },
        approval: file.approval ?? 'prompt',
        children: { ...DEFAULT_CHILD_LIMITS, ...file.children },
        ...(file.sandbox?.exec === 'bwrap' ? { sandbox: { exec: 'bwrap', network: file.sandbox.network ?? false } } : {}),
        ...(file.lineage !== undefined ? { lineage: file.lineage } : {}),
        ...(file.pricing !== undefined ? { pricing: file.pricing } : {}),
        ...agentFieldsOf(file, baseDir)
      })
    }
  })
}

/** A task file's limits with the defaults filled in (docs/task-file.md, "Limits"). */
const limitsOf = (given: TaskFile['limits']): Limits => {
  if (given === undefined) return DEFAULT_LIMITS
  const { stall, ...rest } = given
  const settings = stallSettings(stall)
  return settings === undefined ? { ...DEFAULT_LIMITS, ...rest } : { ...DEFAULT_LIMITS, ...rest, stall: settings }
}

/**
 * A dollar budget needs a price for every model the tree may call: the task's providers and every
 * agent's (docs/task-file.md, "Usage and budgets").
 */
const checkPricing = (file: TaskFile, source: string | undefined): ContractError | undefined => {
  const budgeted =
    file.limits?.maxCostUsd !== undefined ||
    file.lineage?.treeMaxCostUsd !== undefined ||
    Object.values(file.agents ?? {}).some((agent) => agent.limits?.maxCostUsd !== undefined)
  if (!budgeted) return undefined
  const providers = [...file.providers, ...Object.values(file.agents ?? {}).flatMap((agent) => agent.providers ?? [])]
  const unpriced = unpricedProvider(file.pricing, providers)
  if (unpriced === undefined) return undefined
  return new ContractError({
    message: `pricing: has no entry for model ${quoteName(unpriced.model)} of provider ${quoteName(unpriced.name)}, which limits.maxCostUsd needs to count dollars`,
    field: 'pricing',
    source
  })
}

/** The agent fields of a contract: only those the file has, so a first-edition contract stays as it was. */
const agentFieldsOf = (file: TaskFile, baseDir: string): Partial<TaskContract> => {
  const fields: { -readonly [K in keyof TaskContract]?: TaskContract[K] } = {}
  if (file.agent !== undefined) fields.agent = file.agent
  if (file.startedWithTools !== undefined) fields.startedWithTools = file.startedWithTools
  if (file.instructions !== undefined) fields.instructions = file.instructions
  if (file.model !== undefined) fields.model = file.model
  if (file.tools !== undefined) fields.tools = file.tools
  if (file.delegates !== undefined) fields.delegates = file.delegates
  if (file.output !== undefined) fields.output = file.output
  if (file.agents !== undefined) fields.agents = agentDefinitions(file.agents, file.providers)
  // Relative to the task file's folder; a child's are absolute already.
  if (file.toolModules !== undefined) fields.toolModules = file.toolModules.map((module) => path.resolve(baseDir, module))
  // A stdio server runs in the task file's folder unless it says otherwise, wherever the run is driven.
  if (file.mcpServers !== undefined) {
    fields.mcpServers = Object.fromEntries(
      Object.entries(file.mcpServers).map(([name, spec]) => [name, isHttpServer(spec) ? spec : { ...spec, cwd: path.resolve(baseDir, spec.cwd ?? '.') }])
    )
  }
  return fields
}
