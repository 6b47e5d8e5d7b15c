import { type ChatMessage, FINAL_ANSWER, type ToolEffect, FINAL_ANSWER_ACCEPTED, type TaskContract, type ToolCall, type VerifySpec } from '@agentvisor/core'

/** One tool call's answer as the steps table keeps it (and the model reads it). */
export interface ToolResultRecord {
  readonly toolCallId: string
  readonly name: string
  readonly ok: boolean
  readonly output: string
  /** A tool that is not a built-in: where it comes from and its effect class, for the trace (docs/tools.md). */
  readonly source?: string | undefined
  readonly effect?: ToolEffect | undefined
  /** The stall warning its output ends with, by rule (driver/stall.ts). */
  readonly stall?: 'repeat' | 'noProgress' | undefined
}

/** What a step contributes to the conversation; the steps table holds exactly this. */
export interface StepRecord {
  readonly text: string
  readonly toolCalls: ReadonlyArray<ToolCall>
  /** Undefined while the step's tools have not run yet. */
  readonly results?: ReadonlyArray<ToolResultRecord> | undefined
  /** Why verification did not pass after a step the model considered finished. */
  readonly feedback?: string | undefined
}

const RULES = [
  'You are an agent working inside a workspace folder. Use the tools to reach the goal.',
  'Paths are relative to the workspace; you cannot leave it.'
]
const SYSTEM_PROMPT = [...RULES, 'When the goal is reached, answer with a short summary and no tool calls.'].join(' ')
/** An agent with an `output` ends through `final_answer` (docs/agents.md, "Structured results"). */
const SYSTEM_PROMPT_WITH_OUTPUT = [...RULES, 'When the goal is reached, call final_answer with your result: its arguments must match its schema.'].join(' ')

/** agentvisor's own rules, then the agent's instructions (docs/agents.md). */
const systemPrompt = (contract: TaskContract): string => {
  const rules = contract.output === undefined ? SYSTEM_PROMPT : SYSTEM_PROMPT_WITH_OUTPUT
  return contract.instructions === undefined ? rules : `${rules}\n\n${contract.instructions}`
}

const describeVerify = (spec: VerifySpec): string => {
  if ('fileContains' in spec) return `${spec.fileContains.path} contains ${JSON.stringify(spec.fileContains.text)}`
  if ('fileEquals' in spec) return `${spec.fileEquals.path} equals ${JSON.stringify(spec.fileEquals.text)}`
  if ('command' in spec) return `\`${spec.command.run}\` exits with ${spec.command.exitCode ?? 0}`
  return spec.allOf.map(describeVerify).join('; and ')
}

/** The opening messages of every run: the rules and the goal (with how success is checked). */
export const openingMessages = (contract: TaskContract): ChatMessage[] => [
  { role: 'system', content: systemPrompt(contract) },
  {
    role: 'user',
    content: contract.verify === undefined ? contract.goal : `${contract.goal}\n\nSuccess is checked by: ${describeVerify(contract.verify)}.`
  }
]

/** The messages one step adds: the model's answer, its tool results, and any verification feedback. */
export const stepMessages = (step: StepRecord): ChatMessage[] => {
  const messages: ChatMessage[] = [{ role: 'assistant', content: step.text, toolCalls: step.toolCalls }]
  for (const result of step.results ?? []) {
    messages.push({ role: 'tool', toolCallId: result.toolCallId, name: result.name, content: result.output })
  }
  if (step.feedback !== undefined) messages.push({ role: 'user', content: step.feedback })
  return messages
}

/** Rebuilds the whole conversation from the stored steps (how a resumed run gets its memory back). */
export const rebuildConversation = (contract: TaskContract, steps: ReadonlyArray<StepRecord>): ChatMessage[] => [
  ...openingMessages(contract),
  ...steps.flatMap(stepMessages)
]

/** Whitespace that `\s+` -> ' ' would change: a run of two, or any but a plain space. */
const FOLDS = /\s\s|[^\S ]/

/** A one-line description of what a dispatch sent, for the trace (never the whole prompt). */
export const summarizePrompt = (messages: ReadonlyArray<ChatMessage>): string => {
  const last = messages[messages.length - 1]
  if (last === undefined) return '0 messages'
  const content = last.role === 'assistant' ? last.content : last.content
  const excerpt = content.length > 120 ? `${content.slice(0, 117)}...` : content
  // Nearly every excerpt has no whitespace to fold: a test allocates nothing, a replace a string.
  const folded = FOLDS.test(excerpt) ? excerpt.replace(/\s+/g, ' ') : excerpt
  return `${messages.length} messages; last (${last.role}): ${folded}`
}

/**
 * The result the last answer gave through `final_answer`, when that call was accepted (its
 * arguments validated): read from the conversation, so a resumed run finds it in its stored steps.
 */
export const finalAnswerOf = (messages: ReadonlyArray<ChatMessage>): Readonly<Record<string, unknown>> | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.role !== 'assistant') continue
    for (const call of message.toolCalls) {
      if (call.name !== FINAL_ANSWER) continue
      // Its results follow it: only the messages after it are looked at, not the whole conversation.
      for (let j = i + 1; j < messages.length; j++) {
        const m = messages[j]!
        if (m.role === 'tool' && m.toolCallId === call.id && m.content === FINAL_ANSWER_ACCEPTED)
          return JSON.parse(call.arguments) as Readonly<Record<string, unknown>>
      }
    }
    return undefined
  }
  return undefined
}

/**
 * A succeeded run's `output` (docs/agents.md, "Structured results"): its accepted `final_answer`
 * (only an agent with an `output` schema is offered one), else the text of the model's last
 * answer, the one that ended the run's last turn; nothing when that answer had no text. An
 * earlier answer's text (a plan announced at step 1, a previous turn's reply) is never the output.
 */
export const runOutput = (messages: ReadonlyArray<ChatMessage>): unknown => {
  const answer = finalAnswerOf(messages)
  if (answer !== undefined) return answer
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === 'assistant') return message.content === '' ? undefined : message.content
  }
  return undefined
}

/** A run's steps as their rows are read back (steps.table.ts), for what they produced. */
interface StoredStep {
  readonly text: string
  readonly tool_calls: ReadonlyArray<ToolCall>
  readonly results: ReadonlyArray<ToolResultRecord> | null
  readonly feedback: string | null
}

/** `runOutput` of a run read from the store (a child, a trace): the same answer its driver gave. */
export const storedOutput = (steps: ReadonlyArray<StoredStep>): unknown =>
  runOutput(
    steps.flatMap((row) => stepMessages({ text: row.text, toolCalls: row.tool_calls, results: row.results ?? undefined, feedback: row.feedback ?? undefined }))
  )

/** What a resumed run is told when its tools are not those it started with; undefined when they are. */
export const toolsChangedNote = (before: ReadonlyArray<string>, now: ReadonlyArray<string>): string | undefined => {
  const gone = before.filter((name) => !now.includes(name))
  const added = now.filter((name) => !before.includes(name))
  if (gone.length === 0 && added.length === 0) return undefined
  const parts = [...(gone.length > 0 ? [`no longer available: ${gone.join(', ')}`] : []), ...(added.length > 0 ? [`new: ${added.join(', ')}`] : [])]
  return `Note: the tools you may call changed while this run was stopped (${parts.join('; ')}).`
}
