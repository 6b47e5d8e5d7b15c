import {
  type ChatMessage,
  type CommandSettings,
  type CompiledPolicy,
  type ModelPrice,
  type Provider,
  type RetryPolicy,
  type SecretSet,
  type TaskContract,
  type ToolCall,
  type ToolCatalogue,
  type ToolDefinition,
  type ToolSpec,
  type UsageTally,
  type Workspace,
  runCommandSettings
} from '@agentvisor/core'
import type { Database, RunWriter } from '@agentvisor/store'
import type { Clock, Effect } from 'effect'
import type { Kysely } from 'kysely'
import type { Actor } from 'xstate'
import type { ApprovalAnswer, ApprovalRequest } from '../approval/decide.js'
import type { Bus } from '../protocol/bus.js'
import type { ChildRuns } from './child-runs.js'
import type { runMachine } from '../machine/run-machine.js'
import type { CircuitBreakers } from './circuit-breaker.js'
import type { RunObserver } from './run-observer.js'
import type { RunBudget, TreeBudgets } from './budget.js'
import type { TransitionJournal } from './transition-journal.js'

/** Everything one run's driver needs; built by the supervisor, owned by the run's fiber. */
export interface RunDriverDeps {
  readonly db: Kysely<Database>
  /** The per-step writes and reads (prepared statements on SQLite). */
  readonly writer: RunWriter
  readonly runId: string
  readonly contract: TaskContract
  readonly providers: ReadonlyArray<Provider>
  /**
   * The calls each of `providers` already had in this run, in chain order: from the run's
   * receipts on a resume (`countProviderDispatches`), none for a new run. Where `ChatRequest.dispatch` starts.
   */
  readonly providerDispatches?: ReadonlyArray<number> | undefined
  readonly workspace: Workspace
  readonly actor: Actor<typeof runMachine>
  /** The conversation so far (opening messages plus every stored step); the driver appends to it. */
  readonly messages: ChatMessage[]
  /** The last transition's seq (0 for a new run). */
  readonly seq: number
  readonly observers: ReadonlyArray<RunObserver>
  readonly retryPolicy: RetryPolicy
  /** Epoch ms after which the run times out: creation time plus `timeoutMs`, so downtime counts. */
  readonly deadline: number
  /** Per-attempt deadline applied when the provider config sets none. */
  readonly attemptTimeoutMs: number
  readonly breakers: CircuitBreakers
  /** The process's share of every budgeted tree (budget.ts). */
  readonly budgets: TreeBudgets
  /** What the run's calls have cost so far: from the store on a resume, added to at each answer. */
  readonly usage: UsageTally
  /** The run's policy: its contract's layers plus the decisions remembered for its workspace. */
  readonly policy: CompiledPolicy
  /** Who answers `ask`s when the contract says `prompt` (the terminal, or a TS callback). */
  readonly approver?: Approver | undefined
  readonly newId: () => string
  /** This driver's fencing token: every write checks it, so a superseded driver writes nothing. */
  readonly leaseToken: number
  /** Where child runs go (and events are published); without it, `spawn_child` is not offered. */
  readonly bus?: Bus | undefined
  /** How many runs this process drives now (group commits pay off only with company). */
  readonly concurrentRuns?: () => number
  /** Ends a child nobody drives once its cancel is requested (see child-runs.ts). */
  readonly endUndrivenChild?: (childId: string) => Effect.Effect<void>
  /** Where failures the run survives are logged (the worker's log, else stderr). */
  readonly warn?: ((line: string) => void) | undefined
  /**
   * The API keys in use: every text a provider or a tool hands the run (answers, error messages,
   * partial output, tool results, verification feedback) is redacted with it before it is
   * stored, published or shown (docs/task-file.md, "API keys").
   */
  readonly secrets?: SecretSet | undefined
  /** The tools the run knows (docs/task-file.md, "Tools offered to the model"); the built-ins when omitted. */
  readonly tools?: ToolCatalogue | undefined
  /** The W3C trace context the run was handed over under, from another process (docs/telemetry.md). */
  readonly traceparent?: string | undefined
}

/** Someone who can answer approval requests while the run waits: a terminal prompt, a TS callback. */
export interface Approver {
  readonly source: 'prompt' | 'api'
  /** `signal` aborts when the request was decided elsewhere meanwhile: the approver may stop asking. */
  readonly decide: (request: ApprovalRequest, signal?: AbortSignal) => Promise<ApprovalAnswer>
  /**
   * Answers a question the model asked (`ask_human`): the terminal asks it. Absent: questions wait
   * for `agentvisor answer` (docs/policy.md, "Questions"). Undefined: no answer, the run pauses.
   */
  readonly answer?: ((question: QuestionRequest, signal?: AbortSignal) => Promise<string | undefined>) | undefined
}

/** A question a run waits on, as an approver is asked it. */
export interface QuestionRequest {
  readonly id: string
  readonly step: number
  readonly question: string
}

/**
 * One drive of a run: the one record every concept module of the driver reads and the only
 * mutable memory besides the journal's. The journal owns the machine, seq and what is staged;
 * this holds the step's conversation. Modules are plain functions of it, so a run costs one
 * record rather than a closure per function.
 */
export interface Drive {
  readonly deps: RunDriverDeps
  readonly journal: TransitionJournal
  readonly children: ChildRuns
  readonly tools: ToolCatalogue
  readonly offeredTools: ReadonlyArray<ToolSpec>
  /** The tool calls of the last reply: what `acting` performs (set by the model call). */
  toolCalls: ReadonlyArray<ToolCall>
  /** The step whose reply this driver itself just recorded, until its `acting` (tool-execution.ts). */
  freshStep: number | undefined
  /** Built on the first command: the environment without the contract's keys, and its sandbox. */
  commandSettings: CommandSettings | undefined
  /** Epoch ms from the drive's Clock (tests move it): `drivenNow`, one function for every drive. */
  readonly now: (this: Drive) => number
  /** The drive's Clock, set when the loop starts (until then, the system's time). */
  clock: Clock.Clock | undefined
  /** The catalogue's entry for each of `toolCalls`, looked up once a step (tool-execution.ts). */
  readonly stepTools: StepTools
  /** The budgets its dispatches are held against; undefined when none bounds the run (budget.ts). */
  readonly budget: RunBudget | undefined
  /** Each provider's price by the task's `pricing`, in chain order (undefined: none). */
  readonly prices: ReadonlyArray<ModelPrice | undefined>
  /** The offered tools' specs in characters, for a budget's prompt estimate; counted on the first check. */
  toolsChars: number | undefined
  /** The calls each provider of the chain has had in this run so far (`ChatRequest.dispatch`), in chain order. */
  readonly dispatched: number[]
}

/** Which calls `tools` was looked up for, and the entries, refilled in place for each step. */
export interface StepTools {
  calls: ReadonlyArray<ToolCall> | undefined
  readonly tools: Array<ToolDefinition | undefined>
}

/** A drive's time: one function for every drive, reading the drive's own Clock (no closure per run). */
export function drivenNow(this: Drive): number {
  const clock = this.clock
  return clock === undefined ? Date.now() : clock.unsafeCurrentTimeMillis()
}

/** Where provider and tool text enters the run; free when no key is known. */
export const redact = (drive: Drive, text: string): string => {
  const secrets = drive.deps.secrets
  return secrets === undefined || secrets.isEmpty ? text : secrets.redact(text)
}

/** How commands (tools, verification) run for this run. */
export const commandsOf = (drive: Drive): CommandSettings => (drive.commandSettings ??= runCommandSettings(drive.deps.contract))
