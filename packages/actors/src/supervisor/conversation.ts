import type { ChatMessage, TaskContract, ToolCall, VerifySpec } from '@agentvisor/core'

/** One tool call's answer as the steps table keeps it (and the model reads it). */
export interface ToolResultRecord {
  readonly toolCallId: string
  readonly name: string
  readonly ok: boolean
  readonly output: string
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

const SYSTEM_PROMPT = [
  'You are an agent working inside a workspace folder. Use the tools to reach the goal.',
  'Paths are relative to the workspace; you cannot leave it.',
  'When the goal is reached, answer with a short summary and no tool calls.'
].join(' ')

const describeVerify = (spec: VerifySpec): string => {
  if ('fileContains' in spec) return `${spec.fileContains.path} contains ${JSON.stringify(spec.fileContains.text)}`
  if ('fileEquals' in spec) return `${spec.fileEquals.path} equals ${JSON.stringify(spec.fileEquals.text)}`
  if ('command' in spec) return `\`${spec.command.run}\` exits with ${spec.command.exitCode ?? 0}`
  return spec.allOf.map(describeVerify).join('; and ')
}

/** The opening messages of every run: the rules and the goal (with how success is checked). */
export const openingMessages = (contract: TaskContract): ChatMessage[] => [
  { role: 'system', content: SYSTEM_PROMPT },
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
