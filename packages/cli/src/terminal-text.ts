// What a terminal may act on instead of showing: C0 controls (tab aside; a newline where it
// does not belong), DEL, C1 controls (U+0080-U+009F: U+009B is a CSI on terminals that honour
// 8-bit controls), line and paragraph separators, and the bidirectional marks, embeddings,
// overrides and isolates that make text read other than it is (docs/cli.md, "Output").
const UNSAFE_LINE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/
const UNSAFE_LINE_ALL = new RegExp(UNSAFE_LINE.source, 'g')
const UNSAFE_TEXT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/
const UNSAFE_TEXT_ALL = new RegExp(UNSAFE_TEXT.source, 'g')

const hex = (code: number, width: number): string => code.toString(16).padStart(width, '0')

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r' }

/** A character shown the way a JavaScript string literal would write it: `\x1b`, `\u202e`. */
const visible = (char: string): string => {
  const named = NAMED[char]
  if (named !== undefined) return named
  const code = char.charCodeAt(0)
  return code <= 0xff ? `\\x${hex(code, 2)}` : `\\u${hex(code, 4)}`
}

/**
 * `text` made safe to print on a terminal: every control character, and every character that
 * reorders what is shown, written out visibly (`\x1b[2J`, `\u202e`) instead of acted on. Tabs
 * stay; newlines stay only in `multiline` text (a line of an error or a progress message must
 * stay one line). Everything else, other scripts and emoji included, is printed as is.
 *
 * For every human-readable line of text the CLI did not write itself: a task file's field
 * names, a goal, a model's answer, a tool's output, an error message, a path.
 *
 * @example
 * terminalSafe('bad field "\u001b[2Jx"') // 'bad field "\\x1b[2Jx"'
 */
export const terminalSafe = (text: string, multiline = false): string => {
  // The fast path: nearly every line holds nothing to escape, and `runs` prints thousands.
  if (multiline ? !UNSAFE_TEXT.test(text) : !UNSAFE_LINE.test(text)) return text
  return text.replace(multiline ? UNSAFE_TEXT_ALL : UNSAFE_LINE_ALL, visible)
}

// Characters JSON.stringify (and SQLite's json_object) leave raw in a string but a terminal may
// act on: DEL, C1, the separators and the bidirectional controls. C0 is already `\u00XX`.
const JSON_UNSAFE = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/
const JSON_UNSAFE_ALL = new RegExp(JSON_UNSAFE.source, 'g')

/**
 * Serialised JSON with the characters a terminal could act on written as `\uXXXX` escapes. The
 * result is valid JSON with the same values: outside strings JSON allows none of these
 * characters, and inside one `\uXXXX` is the same character.
 *
 * @example
 * JSON.parse(terminalSafeJson(JSON.stringify({ text: '\u009b2J' }))).text === '\u009b2J' // true
 */
export const terminalSafeJson = (json: string): string =>
  JSON_UNSAFE.test(json) ? json.replace(JSON_UNSAFE_ALL, (char) => `\\u${hex(char.charCodeAt(0), 4)}`) : json
