/*
 * How every message quotes a name it was given (docs/task-file.md, "Names in messages"): a tool,
 * an agent, an MCP server, a policy layer or rule, a field. A name can hold characters a reader
 * cannot see (a zero-width space, a bidirectional override that shows `cexe` as `exec`), so a
 * message that printed it raw would name something other than what is there.
 */

/**
 * What a reader cannot see, or sees as something else: control characters (Cc), format
 * characters (Cf: zero-width spaces and joiners, bidirectional marks and overrides, the BOM, tag
 * characters), private-use (Co), unassigned (Cn) and lone surrogate (Cs) code points, line and
 * paragraph separators, every space but U+0020, variation selectors, the combining grapheme
 * joiner and the Hangul fillers, which render as nothing.
 */
const HIDDEN =
  /[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u115f\u1160\u3164\uffa0\p{Variation_Selector}"\\]|\u034f/u
const HIDDEN_ALL = new RegExp(HIDDEN.source, 'gu')
// The same characters but `"` and `\`, for text whose quotes are already escaped.
const ONLY_HIDDEN_ALL = new RegExp(HIDDEN.source.replace('"\\\\]', ']'), 'gu')

const escaped = (char: string): string => (char === '"' || char === '\\' ? `\\${char}` : `\\u{${char.codePointAt(0)!.toString(16).toUpperCase()}}`)

/**
 * `name` between double quotes, every character a reader could not see written as `\u{...}`
 * (`"ex\u{200B}ec"`), and `"` and `\` escaped, so that the quoted text is exactly the name. A
 * name of letters, digits and punctuation comes back as `"name"`. Not JSON: it is for people.
 *
 * @example
 * quoteName('exec') // '"exec"'
 * quoteName('ex\u200bec') // '"ex\\u{200B}ec"'
 * quoteName('') // '""'
 */
export const quoteName = (name: unknown): string => {
  const text = typeof name === 'string' ? name : String(name)
  return `"${HIDDEN.test(text) ? text.replace(HIDDEN_ALL, escaped) : text}"`
}

const PLAIN_SEGMENT = /^[A-Za-z0-9_$-]+$/

/**
 * A field's path as messages show it: `agents.researcher.tools.0`, a segment that is not plain
 * letters, digits, `_`, `$` or `-` quoted by `quoteName` (`agents."ex\u{200B}ec".tools`).
 *
 * @example
 * fieldPathText(['agents', 'ex\u200bec', 'tools', 0]) // 'agents."ex\\u{200B}ec".tools.0'
 */
export const fieldPathText = (path: ReadonlyArray<PropertyKey>): string =>
  path
    .map((segment) =>
      typeof segment === 'number' || (typeof segment === 'string' && PLAIN_SEGMENT.test(segment)) ? String(segment) : quoteName(String(segment))
    )
    .join('.')

/**
 * `text` with the characters a reader could not see written as `\u{...}`, quotes and backslashes
 * left as they are: for text already quoted another way (a command line as a JSON string).
 *
 * @example
 * revealHidden(JSON.stringify('rm\u202e x')) // '"rm\\u{202E} x"'
 */
export const revealHidden = (text: string): string => text.replace(ONLY_HIDDEN_ALL, escaped)
