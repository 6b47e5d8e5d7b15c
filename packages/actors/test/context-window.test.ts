import type { ChatMessage } from '@agentvisor/core'
import { describe, expect, it } from 'vitest'
import { fitToContext } from '../src/driver/context-window.js'

const readStep = (n: number, size: number): ChatMessage[] => [
  { role: 'assistant', content: '', toolCalls: [{ id: `c${n}`, name: 'read_file', arguments: JSON.stringify({ path: `f${n}.txt` }) }] },
  { role: 'tool', toolCallId: `c${n}`, name: 'read_file', content: 'x'.repeat(size) },
  { role: 'user', content: 'Not done yet: f.txt does not contain DONE.' }
]

const conversation = (steps: number, size: number): ChatMessage[] => [
  { role: 'system', content: 'rules '.repeat(100) },
  { role: 'user', content: 'the goal '.repeat(200) },
  ...Array.from({ length: steps }, (_, i) => readStep(i + 1, size)).flat()
]

describe('fitting a request to contextTokens (docs/task-file.md, "Long conversations")', () => {
  it('sends a conversation that fits as it is, the very array', () => {
    const messages = conversation(3, 100)
    const fitted = fitToContext(messages, 10_000, 0)
    expect(fitted.messages).toBe(messages)
    expect(fitted.elided).toEqual([])
  })

  it('never elides the system prompt, the goal or anything of the last two steps, even past the limit', () => {
    const messages = conversation(2, 5000)
    expect(fitToContext(messages, 100, 0).elided).toEqual([])
    const three = fitToContext(conversation(3, 5000), 100, 0)
    expect(three.elided).toEqual([{ step: 1, tool: 'read_file', target: 'f1.txt', size: 5000 }])
    expect(three.messages.slice(0, 2)).toEqual(conversation(3, 5000).slice(0, 2))
  })

  it('elides the oldest results first, only as many as it takes to fit, and says what each was', () => {
    const messages = conversation(10, 4000)
    // ~43,500 characters against 20,000 (5,000 tokens): each stub saves ~3,875, so seven go and six would not do.
    const fitted = fitToContext(messages, 5000, 0)
    expect(fitted.elided.map((e) => e.step)).toEqual([1, 2, 3, 4, 5, 6, 7])
    expect(fitToContext(messages, 5000 + 1000, 0).elided).toHaveLength(6)
    const tools = fitted.messages.filter((m) => m.role === 'tool')
    expect(tools[0]!.content).toBe(
      '[elided to fit the context window: the read_file f1.txt result of step 1, 4000 characters; call the tool again if you need it]'
    )
    expect(tools.slice(7).every((m) => m.content.length === 4000)).toBe(true)
    // The stored conversation is not touched.
    expect(messages.filter((m) => m.role === 'tool').every((m) => m.content.length === 4000)).toBe(true)
  })
})
