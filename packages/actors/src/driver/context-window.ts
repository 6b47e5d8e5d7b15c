import { type ChatMessage, estimateTokens } from '@agentvisor/core'

// Long conversations (docs/task-file.md, "Long conversations"): with `limits.contextTokens`, a
// request that would pass it is sent with its oldest tool results replaced by one-line stubs. The
// stored conversation is never changed: what is elided is decided again, the same way, for every
// request from the messages it would send, so a resumed run elides exactly what it did before.

/** One tool result left out of a request. */
export interface Elision {
  /** The step whose tool call it answered. */
  readonly step: number
  readonly tool: string
  /** The built-in's path or command, when the call named one. */
  readonly target: string
  /** Characters of the result left out. */
  readonly size: number
}

/** A request's messages within the limit, and what was left out to get there (nothing: the messages as they are). */
export interface FittedRequest {
  readonly messages: ReadonlyArray<ChatMessage>
  readonly elided: ReadonlyArray<Elision>
}

/** A message's share of the prompt, in the estimate budgets use (four characters a token). */
const charactersOf = (message: ChatMessage): number => {
  let characters = message.content.length + 8
  if (message.role === 'assistant') for (const call of message.toolCalls) characters += call.name.length + call.arguments.length + 16
  return characters
}

/** How many of the last steps are never elided. */
const KEPT_STEPS = 2

/**
 * `messages` fitted under `contextTokens` (with `toolsChars` of tool specs sent beside them): the
 * oldest tool results replaced by a stub naming what was elided (tool, target, size, step), one at
 * a time, until the estimate fits. Never elided: the system prompt, the goal, and anything of the
 * last two steps. When even that does not fit, the request goes as small as it can be made.
 */
export const fitToContext = (messages: ReadonlyArray<ChatMessage>, contextTokens: number, toolsChars: number): FittedRequest => {
  let characters = toolsChars
  for (const message of messages) characters += charactersOf(message)
  if (estimateTokens(characters) <= contextTokens) return { messages, elided: [] }
  // Where each step begins (its assistant message), to tell the last two apart.
  const starts: number[] = []
  messages.forEach((message, index) => {
    if (message.role === 'assistant') starts.push(index)
  })
  // Everything from the first of the last two steps on (all of a conversation of two steps or fewer).
  const keepFrom = starts[Math.max(0, starts.length - KEPT_STEPS)] ?? messages.length
  const out = [...messages]
  const elided: Elision[] = []
  let step = 0
  let calls = new Map<string, { readonly name: string; readonly arguments: string }>()
  for (let index = 0; index < keepFrom && estimateTokens(characters) > contextTokens; index++) {
    const message = messages[index]!
    if (message.role === 'assistant') {
      step++
      calls = new Map(message.toolCalls.map((call) => [call.id, call]))
      continue
    }
    if (message.role !== 'tool') continue
    const call = calls.get(message.toolCallId)
    const elision: Elision = { step, tool: message.name, target: targetOf(call?.arguments), size: message.content.length }
    const stub = stubOf(elision)
    if (stub.length >= message.content.length) continue
    characters += stub.length - message.content.length
    out[index] = { ...message, content: stub }
    elided.push(elision)
  }
  return { messages: out, elided }
}

/** The one line that replaces an elided result: the model can ask for it again. */
export const stubOf = (elision: Elision): string =>
  `[elided to fit the context window: the ${elision.tool}${elision.target === '' ? '' : ` ${elision.target}`} result of step ${elision.step}, ${elision.size} characters; call the tool again if you need it]`

/** A built-in call's path or command, when its arguments name one. */
const targetOf = (raw: string | undefined): string => {
  if (raw === undefined) return ''
  try {
    const args = JSON.parse(raw) as Record<string, unknown> | null
    const target = args?.['path'] ?? args?.['command']
    return typeof target === 'string' ? (target.length > 80 ? `${target.slice(0, 77)}...` : target) : ''
  } catch {
    return ''
  }
}

/** The elisions as the step's prompt summary records them (docs/cli.md, `show --json`). */
export const describeElisions = (elided: ReadonlyArray<Elision>): string =>
  elided.length === 0
    ? ''
    : `; elided ${elided.length} tool result${elided.length === 1 ? '' : 's'}: ${elided
        .map((e) => `${e.tool}${e.target === '' ? '' : ` ${e.target}`} (step ${e.step}, ${e.size} chars)`)
        .join(', ')}`
