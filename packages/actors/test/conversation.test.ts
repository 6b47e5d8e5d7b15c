import { describe, expect, it } from 'vitest'
import { summarizePrompt } from '../src/driver/conversation.js'

describe("a dispatch's prompt summary", () => {
  it('names the message count and the last message on one line, every run of whitespace folded to one space', () => {
    expect(summarizePrompt([])).toBe('0 messages')
    expect(summarizePrompt([{ role: 'user', content: 'Write DONE into out.txt' }])).toBe('1 messages; last (user): Write DONE into out.txt')
    expect(
      summarizePrompt([
        { role: 'user', content: 'goal' },
        { role: 'user', content: 'line one\n\tline  two\u00a0end ' }
      ])
    ).toBe('2 messages; last (user): line one line two end ')
  })

  it('cuts a long last message to 117 characters and an ellipsis', () => {
    const summary = summarizePrompt([{ role: 'user', content: 'x'.repeat(200) }])
    expect(summary).toBe(`1 messages; last (user): ${'x'.repeat(117)}...`)
  })
})
