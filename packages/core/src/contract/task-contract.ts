import { realpathSync } from 'node:fs'
import { homedir } from 'node:os'
import * as path from 'node:path'
import { Either, ParseResult, Schema } from 'effect'
import { ContractError } from '../errors.js'
import { checkedTaskFile } from './contract-check.js'
import { compilePolicy } from '../policy/policy.js'
import { ScriptedStep, TimerMs } from '../provider/scripted-step.js'
import { isStackOverflow, MAX_NESTING_DEPTH, valueTooDeepAt } from './nesting.js'

// `Schema.Int` is already a safe integer: every count stays exact.
const PositiveInt = Schema.Int.pipe(Schema.positive())
const NonNegativeInt = Schema.Int.pipe(Schema.nonNegative())
/** A duration that becomes a timer: Node's timers take at most 2^31-1 ms (docs/task-file.md). */
const TimerPositiveInt = Schema.Int.pipe(Schema.positive(), TimerMs)
/** Text with something in it besides spaces. */
const NonBlankString = Schema.String.pipe(Schema.filter((s) => s.trim() !== '' || 'must have non-space text'))
/** Providers are reached over HTTP only: a `file:` or `ftp:` URL would fail every dispatch as transient. */
const HttpUrl = Schema.String.pipe(
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

export const Limits = Schema.Struct({
  maxSteps: Schema.optional(PositiveInt),
  maxRetries: Schema.optional(NonNegativeInt),
  dispatchCeiling: Schema.optional(PositiveInt),
  timeoutMs: Schema.optional(TimerPositiveInt)
})
export type Limits = Required<typeof Limits.Type>

/** The defaults of docs/task-file.md ("Limits"). */
export const DEFAULT_LIMITS: Limits = { maxSteps: 10, maxRetries: 2, dispatchCeiling: 50, timeoutMs: 600_000 }

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
  treeDispatchCeiling: PositiveInt
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

/** The task file exactly as written (before defaults and path resolution). */
export const TaskFile = Schema.Struct({
  goal: NonBlankString,
  workspace: NonBlankString,
  providers: Schema.NonEmptyArray(ProviderConfig),
  verify: Schema.optional(VerifySpec),
  limits: Schema.optional(Limits),
  policy: Schema.optional(Schema.Struct({ layers: Schema.Array(PolicyLayer) })),
  approval: Schema.optional(ApprovalMode),
  children: Schema.optional(ChildLimits),
  sandbox: Schema.optional(SandboxSpec),
  lineage: Schema.optional(Lineage)
}).pipe(
  Schema.filter((t) => {
    const seen = new Set<string>()
    for (const [i, p] of t.providers.entries()) {
      if (seen.has(p.name)) return { path: ['providers', i, 'name'], message: `duplicates provider name "${p.name}"` }
      seen.add(p.name)
    }
    return undefined
  })
)
export type TaskFile = typeof TaskFile.Type

/** A validated task: defaults applied, the workspace an absolute path. Built once, read everywhere. */
export interface TaskContract {
  readonly goal: string
  readonly workspace: string
  readonly providers: readonly [ProviderConfig, ...ProviderConfig[]]
  readonly verify?: VerifySpec | undefined
  readonly limits: Limits
  readonly policy: { readonly layers: ReadonlyArray<PolicyLayer> }
  readonly approval: ApprovalMode
  readonly children: ChildLimits
  /** Absent when commands run unconfined (`exec: "none"`, the default). */
  readonly sandbox?: CommandSandbox | undefined
  /** Absent for a root run. */
  readonly lineage?: Lineage | undefined
}

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
  else detail = issue.message.split('\n')[0]!
  const field = at.map(String).join('.')
  return { field, message: field === '' ? detail : `${field}: ${detail}` }
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

/**
 * Validates an already-parsed task (a task file's content or a TS object). Relative workspace paths
 * resolve against `baseDir` (the task file's folder, or the cwd for the TS API). `lineage` is
 * refused: only agentvisor sets it, on the child contracts it builds (`parseChildContract`).
 */
export const parseTaskContract = (input: unknown, baseDir: string, source?: string): Either.Either<TaskContract, ContractError> => {
  if (typeof input === 'object' && input !== null && (input as { lineage?: unknown }).lineage !== undefined) {
    return Either.left(new ContractError({ message: 'lineage: is set by agentvisor for child runs and is not allowed in a task', field: 'lineage', source }))
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
      return Either.right<TaskContract>({
        goal: file.goal,
        workspace: path.resolve(baseDir, file.workspace),
        providers: file.providers,
        verify: file.verify,
        limits: { ...DEFAULT_LIMITS, ...file.limits },
        policy: file.policy ?? { layers: [] },
        approval: file.approval ?? 'prompt',
        children: { ...DEFAULT_CHILD_LIMITS, ...file.children },
        ...(file.sandbox?.exec === 'bwrap' ? { sandbox: { exec: 'bwrap', network: file.sandbox.network ?? false } } : {}),
        ...(file.lineage !== undefined ? { lineage: file.lineage } : {})
      })
    }
  })
}
