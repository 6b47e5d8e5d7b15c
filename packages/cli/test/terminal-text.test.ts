import { describe, expect, it } from 'vitest'
import { terminalSafe, terminalSafeJson } from '../src/terminal-text.js'

const ESC = '\u001b'

describe('terminal-safe text', () => {
  it('shows escapes, C0 and C1 controls and bidi overrides visibly instead of passing them to the terminal', () => {
    expect(terminalSafe(`a${ESC}[2Jb`)).toBe('a\\x1b[2Jb')
    expect(terminalSafe(`${ESC}]0;title\u0007`)).toBe('\\x1b]0;title\\x07')
    expect(terminalSafe('csi \u009b31m')).toBe('csi \\x9b31m')
    expect(terminalSafe('evil\u202etxt.exe')).toBe('evil\\u202etxt.exe')
    expect(terminalSafe('iso\u2066late\u2069 and \u200f')).toBe('iso\\u2066late\\u2069 and \\u200f')
    expect(terminalSafe('line\u2028sep del\u007f nul\u0000')).toBe('line\\u2028sep del\\x7f nul\\x00')
    expect(terminalSafe('over\rwrite')).toBe('over\\rwrite')
  })

  it('keeps tabs always and newlines only in multi-line text', () => {
    expect(terminalSafe('a\tb\nc')).toBe('a\tb\\nc')
    expect(terminalSafe('a\tb\nc', true)).toBe('a\tb\nc')
    expect(terminalSafe(`a\n${ESC}c`, true)).toBe('a\n\\x1bc')
  })

  it('leaves ordinary text, other scripts and emoji as they are', () => {
    for (const text of ['plain text', 'naïve café', 'שלום عربي 日本語', 'emoji 🚀', 'C:\\path\\x1b literal']) expect(terminalSafe(text)).toBe(text)
  })
})

describe('terminal-safe JSON', () => {
  it('escapes what JSON.stringify leaves raw and keeps valid JSON with the same values', () => {
    const value = { text: `\u009b2J \u202e \u2028 \u2029 \u007f ${ESC}[0m`, nested: ['\u0085'] }
    const json = terminalSafeJson(JSON.stringify(value))
    expect(json).not.toMatch(/[\u001b\u007f-\u009f\u2028\u2029\u202e]/)
    expect(JSON.parse(json)).toEqual(value)
  })

  it('returns JSON without such characters unchanged', () => {
    const json = JSON.stringify({ a: 'plain', b: [1, 2] })
    expect(terminalSafeJson(json)).toBe(json)
  })
})
