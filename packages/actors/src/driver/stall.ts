import type { ChatMessage, RunError, StallSettings, ToolCall } from '@agentvisor/core'
import { canonical } from '../protocol/child-contract.js'

// Stall detection (docs/task-file.md, "Stalls"): a run whose model repeats itself is warned once,
// then ended `failed` with kind `stalled`, instead of burning its steps and its dispatch ceiling.
// Two rules, both read from the conversation alone, so a resumed run (whose conversation is
// rebuilt from its stored steps) judges every step exactly as the driver that first ran it:
// - the same call (tool name and arguments) `repeats` times within the last `window` steps: the
//   call's result carries a warning; one more and the step's calls do not run;
// - `window` steps in a row with no progress (no tool result the run had not had before, no new
//   verification outcome): the step's last result, or its feedback, carries a warning; one more
//   such step ends the run.
// Both warnings are fixed texts for the settings, so they are told apart from what a tool said.

/** Which rule a warning or a stall comes from. */
export type StallRule = 'repeat' | 'noProgress'

/** Appended to a repeated call's result when it reaches `repeats`. */
export const repeatWarning = (settings: StallSettings): string =>
  `\n\n[agentvisor] This exact call (the same tool with the same arguments) has now been made ${settings.repeats} times within ${settings.window} steps. ` +
  'One more identical call ends the run as stalled: try something else.'

/** Appended to the step's last result (or its feedback) after `window` steps without progress. */
export const noProgressWarning = (settings: StallSettings): string =>
  `\n\n[agentvisor] ${settings.window} steps in a row brought no new tool result and no new verification outcome. ` +
  'One more step like them ends the run as stalled: try something else.'

/** A text without the warnings this module appends to it. */
const withoutWarnings = (text: string, settings: StallSettings): string => {
  let out = text
  for (const warning of [noProgressWarning(settings), repeatWarning(settings)]) if (out.endsWith(warning)) out = out.slice(0, -warning.length)
  return out
}

/**
 * A call's identity for the repeat rule: its tool and its arguments, canonical when they are JSON
 * (keys sorted: the same arguments however the model spaced or ordered them).
 */
export const callKey = (call: Pick<ToolCall, 'name' | 'arguments'>): string => {
  try {
    return `${call.name} ${canonical(JSON.parse(call.arguments))}`
  } catch {
    return `${call.name} ${call.arguments}`
  }
}

/** A call as a person reads it in an error or an event: `read_file {"path":"a.txt"}`. */
export const describeCall = (call: Pick<ToolCall, 'name' | 'arguments'>): string => {
  const key = callKey(call)
  return key.length > 200 ? `${key.slice(0, 197)}...` : key
}

/** The step's calls that reached `repeats` (to be warned), or the first past it (the run stalls). */
export interface RepeatVerdict {
  readonly stalled?: { readonly call: ToolCall; readonly count: number } | undefined
  /** The keys of the calls whose results carry the warning. */
  readonly warned: ReadonlySet<string>
}

const NOTHING: RepeatVerdict = { warned: new Set() }

/**
 * The repeat rule for the step whose calls are `calls`: its answer is the last assistant message
 * of `messages`, and each call is counted over the last `window` answers, this one included.
 */
export const repeatVerdict = (messages: ReadonlyArray<ChatMessage>, calls: ReadonlyArray<ToolCall>, settings: StallSettings): RepeatVerdict => {
  if (calls.length === 0) return NOTHING
  const counts = new Map<string, number>()
  let answers = 0
  for (let i = messages.length - 1; i >= 0 && answers < settings.window; i--) {
    const message = messages[i]!
    if (message.role !== 'assistant') continue
    answers++
    for (const call of message.toolCalls) {
      const key = callKey(call)
      counts.set(key, (counts.get(key) ?? 0) + 1)
    }
  }
  const warned = new Set<string>()
  for (const call of calls) {
    const key = callKey(call)
    const count = counts.get(key) ?? 0
    if (count > settings.repeats) return { stalled: { call, count }, warned: NOTHING.warned }
    if (count === settings.repeats) warned.add(key)
  }
  return warned.size === 0 ? NOTHING : { warned }
}

/** One step of the conversation as the progress rule reads it. */
interface StepView {
  readonly results: Array<string>
  feedback: string | undefined
}

/** The steps of `messages` and then of `added` (messages not in the conversation yet), neither copied. */
const stepsOf = (messages: ReadonlyArray<ChatMessage>, added: ReadonlyArray<ChatMessage>, settings: StallSettings): StepView[] => {
  const steps: StepView[] = []
  let current: StepView | undefined
  let calls = new Map<string, string>()
  const visit = (message: ChatMessage): void => {
    if (message.role === 'assistant') {
      current = { results: [], feedback: undefined }
      steps.push(current)
      calls = new Map(message.toolCalls.map((call) => [call.id, callKey(call)]))
    } else if (current !== undefined && message.role === 'tool') {
      current.results.push(`${calls.get(message.toolCallId) ?? message.name}\n${withoutWarnings(message.content, settings)}`)
    } else if (current !== undefined && message.role === 'user') {
      const text = withoutWarnings(message.content, settings)
      current.feedback = current.feedback === undefined ? text : `${current.feedback}\n${text}`
    }
  }
  for (const message of messages) visit(message)
  for (const message of added) visit(message)
  return steps
}

/**
 * How many steps in a row, up to the last of `messages`, made no progress: none of their tool
 * results (call and output) had been seen before in the run, and their verification feedback
 * (if any) said nothing the last feedback had not. A follow-up message counts as new feedback.
 */
export const stepsWithoutProgress = (messages: ReadonlyArray<ChatMessage>, settings: StallSettings, added: ReadonlyArray<ChatMessage> = []): number => {
  const tally = keptTally()
  for (const step of stepsOf(messages, added, settings)) countStep(tally, step)
  return tally.streak
}

/** What the progress rule has counted: the results seen, the last feedback, the steps in a row without progress. */
interface Tally {
  readonly seen: ReadonlySet<string>
  /** Where results new to `seen` go: `seen` itself, or a set of their own for steps counted without being kept. */
  readonly fresh: Set<string>
  lastFeedback: string | undefined
  streak: number
}

const keptTally = (): Tally => {
  const seen = new Set<string>()
  return { seen, fresh: seen, lastFeedback: undefined, streak: 0 }
}

/** Counts `step`: progress when it has a result not seen before or feedback unlike the last. */
const countStep = (tally: Tally, step: StepView): void => {
  let progress = false
  for (const result of step.results) {
    if (!tally.seen.has(result) && !tally.fresh.has(result)) {
      tally.fresh.add(result)
      progress = true
    }
  }
  if (step.feedback !== undefined && step.feedback !== tally.lastFeedback) {
    tally.lastFeedback = step.feedback
    progress = true
  }
  tally.streak = progress ? 0 : tally.streak + 1
}

/**
 * The progress rule once the step's results or feedback are known (`added`, not yet in
 * `messages`): `warn` at `window` steps without progress, `stall` past it, else `go`. Counted
 * by the conversation's tally (`ProgressTally`): the same count as `stepsWithoutProgress`,
 * without walking the whole conversation again at every step.
 */
export const progressVerdict = (messages: ReadonlyArray<ChatMessage>, added: ReadonlyArray<ChatMessage>, settings: StallSettings): 'go' | 'warn' | 'stall' => {
  const streak = tallyOf(messages, settings).stepsWithoutProgress(messages, added)
  return streak > settings.window ? 'stall' : streak === settings.window ? 'warn' : 'go'
}

/** One tally per conversation (a drive's `messages`; a resume rebuilds the array, and with it the tally). */
const tallies = new WeakMap<ReadonlyArray<ChatMessage>, ProgressTally>()

const tallyOf = (messages: ReadonlyArray<ChatMessage>, settings: StallSettings): ProgressTally => {
  let tally = tallies.get(messages)
  if (tally === undefined || tally.settings.window !== settings.window || tally.settings.repeats !== settings.repeats) {
    tally = new ProgressTally(settings)
    tallies.set(messages, tally)
  }
  return tally
}

/**
 * `stepsWithoutProgress` kept up to date as a conversation grows. A step that another answer
 * follows is complete: a conversation only grows at its end, and the one message ever rewritten
 * (a follow-up joining the last feedback, docs/policy.md, "Follow-ups") is its last, which belongs
 * to the last step. So the complete steps are counted once, into `seen`, `lastFeedback` and
 * `streak`, and each call reads only the last step (and `added`) against them: a step costs what
 * it adds to the conversation, not the whole conversation.
 */
export class ProgressTally {
  private readonly kept = keptTally()
  /** Where the first step not counted yet begins (an answer), or where reading resumes. */
  private from = 0

  constructor(readonly settings: StallSettings) {}

  /** What `stepsWithoutProgress(messages, settings, added)` gives. */
  stepsWithoutProgress(messages: ReadonlyArray<ChatMessage>, added: ReadonlyArray<ChatMessage> = []): number {
    let start = -1
    for (let i = this.from; i < messages.length; i++) {
      if (messages[i]!.role !== 'assistant') continue
      if (start !== -1) countStep(this.kept, stepsOf(messages.slice(start, i), [], this.settings)[0]!)
      start = i
    }
    if (start !== -1) this.from = start
    // The last step (and any after it in `added`), counted without being kept: it may still grow.
    const rest = stepsOf(messages.slice(this.from), added, this.settings)
    const { seen, lastFeedback, streak } = this.kept
    const tentative: Tally = { seen, fresh: new Set(), lastFeedback, streak }
    for (const step of rest) countStep(tentative, step)
    return tentative.streak
  }
}

/** The error a stalled run ends with: it names the repeated call, or the steps without progress. */
export const stalledError = (settings: StallSettings, repeated?: { readonly call: ToolCall; readonly count: number }): RunError => ({
  kind: 'stalled',
  message:
    repeated === undefined
      ? `${settings.window + 1} steps in a row without a new tool result or a new verification outcome (limits.stall.window ${settings.window})`
      : `${describeCall(repeated.call)} called ${repeated.count} times within ${settings.window} steps (limits.stall.repeats ${settings.repeats})`
})
