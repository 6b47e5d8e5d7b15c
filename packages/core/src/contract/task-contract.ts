import * as path from 'node:path'
import { Either, ParseResult, Schema } from 'effect'
import { ContractError } from '../errors.js'
import { compilePolicy } from '../policy/policy.js'
import { ScriptedStep } from '../provider/scripted-step.js'

const PositiveInt = Schema.Int.pipe(Schema.positive())
const NonNegativeInt = Schema.Int.pipe(Schema.nonNegative())

export const ProviderConfig = Schema.Struct({
  name: Schema.NonEmptyString,
  kind: Schema.Literal('openai', 'anthropic', 'scripted'),
  baseUrl: Schema.optional(Schema.String),
  model: Schema.optional(Schema.NonEmptyString),
  apiKeyEnv: Schema.optional(Schema.NonEmptyString),
  stream: Schema.optional(Schema.Boolean),
  /** Per-attempt deadline: a provider that hangs longer is aborted and the attempt counts as transient. */
  attemptTimeoutMs: Schema.optional(PositiveInt),
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
/** What `verifying` checks after each step (CONTRACT.md §1). */
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
  timeoutMs: Schema.optional(PositiveInt)
})
export type Limits = Required<typeof Limits.Type>

/** The defaults of CONTRACT.md §1. */
export const DEFAULT_LIMITS: Limits = { maxSteps: 10, maxRetries: 2, dispatchCeiling: 50, timeoutMs: 600_000 }

const Globs = Schema.Array(Schema.String)
const ActRules = Schema.Struct({ read: Schema.optional(Globs), write: Schema.optional(Globs), exec: Schema.optional(Globs) })
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
  goal: Schema.NonEmptyString,
  workspace: Schema.NonEmptyString,
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

const decodeTaskFile = Schema.decodeUnknownEither(TaskFile, { errors: 'first', onExcessProperty: 'error' })

/** Turns Effect's parse issue into one line naming the field: `limits.maxSteps: Expected an integer, actual 1.5`. */
const describeIssue = (error: ParseResult.ParseError): { field: string; message: string } => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  if (issue === undefined) return { field: '', message: error.message }
  const field = issue.path.map(String).join('.')
  const detail = issue._tag === 'Unexpected' ? 'is not a known field' : issue.message.split('\n')[0]!
  return { field, message: field === '' ? detail : `${field}: ${detail}` }
}

/**
 * Validates an already-parsed task (a task file's content or a TS object). Relative workspace paths
 * resolve against `baseDir` (the task file's folder, or the cwd for the TS API).
 */
export const parseTaskContract = (
  input: unknown,
  baseDir: string,
  source?: string
): Either.Either<TaskContract, ContractError> =>
  Either.match(decodeTaskFile(input), {
    onLeft: (error) => {
      const { field, message } = describeIssue(error)
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
