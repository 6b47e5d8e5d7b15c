import type { ChatMessage, ToolCall } from '@agentvisor/core'
import { describe, expect, it } from 'vitest'
import { callKey, noProgressWarning, ProgressTally, repeatVerdict, repeatWarning, stepsWithoutProgress } from '../src/driver/stall.js'

const settings = { window: 3, repeats: 2 }
const call = (id: string, args: string, name = 'read_file'): ToolCall => ({ id, name, arguments: args })
const step = (calls: ReadonlyArray<ToolCall>, outputs: ReadonlyArray<string>): ChatMessage[] => [
  { role: 'assistant', content: '', toolCalls: calls },
  ...calls.map((c, i): ChatMessage => ({ role: 'tool', toolCallId: c.id, name: c.name, content: outputs[i] ?? '' }))
]
const opening: ChatMessage[] = [
  { role: 'system', content: 'rules' },
  { role: 'user', content: 'goal' }
]

describe('stall rules', () => {
  it('counts a call the same however the model ordered or spaced its arguments', () => {
    expect(callKey(call('1', '{"path":"a","limit":2}'))).toBe(callKey(call('2', '{ "limit": 2, "path": "a" }')))
    expect(callKey(call('1', '{"path":"a"}'))).not.toBe(callKey(call('1', '{"path":"b"}')))
    expect(callKey(call('1', 'not json'))).toBe('read_file not json')
  })

  it('warns at repeats and stalls past it, counting only the last window answers', () => {
    const a = (id: string) => call(id, '{"path":"a"}')
    const history = [...opening, ...step([a('1')], ['x']), ...step([call('2', '{"path":"b"}')], ['y'])]
    const now = a('3')
    expect(repeatVerdict([...history, ...step([now], [])], [now], settings).warned).toEqual(new Set([callKey(now)]))
    const third = a('4')
    const more = [...opening, ...step([a('1')], ['x']), ...step([now], ['x']), ...step([third], [])]
    expect(repeatVerdict(more, [third], settings).stalled).toEqual({ call: third, count: 3 })
    // Four answers back is outside a window of three: only one in it.
    const later = a('5')
    const spaced = [
      ...opening,
      ...step([a('1')], ['x']),
      ...step([call('2', '{"path":"b"}')], ['y']),
      ...step([call('6', '{"path":"c"}')], ['z']),
      ...step([later], [])
    ]
    expect(repeatVerdict(spaced, [later], settings)).toEqual({ warned: new Set() })
  })

  it('counts steps without a new result or new feedback, ignoring its own warnings', () => {
    const same = (id: string, warning = '') => step([call(id, '{"path":"a"}')], [`x${warning}`])
    expect(stepsWithoutProgress([...opening, ...same('1'), ...same('2'), ...same('3')], settings)).toBe(2)
    // A warned output is the same result as before.
    expect(stepsWithoutProgress([...opening, ...same('1'), ...same('2', repeatWarning(settings) + noProgressWarning(settings))], settings)).toBe(1)
    // A new result resets the count; so does new feedback.
    expect(stepsWithoutProgress([...opening, ...same('1'), ...same('2'), ...step([call('3', '{"path":"b"}')], ['y'])], settings)).toBe(0)
    const text = (feedback: string): ChatMessage[] => [
      { role: 'assistant', content: 'done', toolCalls: [] },
      { role: 'user', content: feedback }
    ]
    expect(stepsWithoutProgress([...opening, ...text('no'), ...text('no'), ...text(`no${noProgressWarning(settings)}`), ...text('no')], settings)).toBe(3)
    expect(stepsWithoutProgress([...opening, ...text('no'), ...text('no'), ...text('other')], settings)).toBe(0)
  })

  it('keeps the progress count of a growing conversation as a walk of the whole conversation gives it, at every step', () => {
    // A small deterministic generator (mulberry32): the same conversations at every run.
    let seed = 7
    const random = () => {
      seed = (seed + 0x6d2b79f5) | 0
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296
    }
    const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(random() * xs.length)]!
    let compared = 0
    for (let run = 0; run < 30; run++) {
      const rules = { window: 2 + (run % 4), repeats: 2 }
      const messages: ChatMessage[] = [...opening]
      const tally = new ProgressTally(rules)
      for (let n = 0; n < 120; n++) {
        const calls = Array.from({ length: Math.floor(random() * 3) }, (_, i) => call(`${n}-${i}`, pick(['{"path":"a"}', '{"path":"b"}', '{ "path": "a" }'])))
        messages.push({ role: 'assistant', content: '', toolCalls: calls })
        const results = calls.map(
          (c): ChatMessage => ({ role: 'tool', toolCallId: c.id, name: c.name, content: pick(['x', 'y', `x${noProgressWarning(rules)}`, 'z']) })
        )
        const feedback: ChatMessage[] = random() < 0.5 ? [{ role: 'user', content: pick(['not yet', 'still not', `not yet${repeatWarning(rules)}`]) }] : []
        // As the driver asks: with the step's results not yet in the conversation, then its feedback.
        for (const added of [results, feedback]) {
          expect(tally.stepsWithoutProgress(messages, added)).toBe(stepsWithoutProgress(messages, rules, added))
          messages.push(...added)
          compared++
        }
        // A follow-up joins the last feedback (the one message ever rewritten) or follows the step.
        if (random() < 0.1) {
          const last = messages[messages.length - 1]!
          if (last.role === 'user') messages[messages.length - 1] = { role: 'user', content: `${last.content}\n\nmore` }
          else messages.push({ role: 'user', content: 'more' })
          expect(tally.stepsWithoutProgress(messages)).toBe(stepsWithoutProgress(messages, rules))
          compared++
        }
      }
    }
    expect(compared).toBeGreaterThan(7000)
  })
})
