// How text is stored, on every dialect alike (docs/deploy.md, "Text in the store"). PostgreSQL's
// `text` cannot hold U+0000, and neither database can hold a lone UTF-16 surrogate (both store
// UTF-8; the drivers turn one into U+FFFD). Tool output and model replies may hold either, so
// every text value is escaped on its way into the store and unescaped on its way out:
//
//   U+0000               -> U+0010 U+FDD0
//   U+0010               -> U+0010 U+FDD1      (the escape character itself)
//   a lone surrogate  s  -> U+0010 U+FDD2 (U+E000 + s - U+D800)
//
// The escape is DLE (U+0010), a control character: `JSON.stringify` escapes every control
// character and every lone surrogate, so JSON text is never changed by the encoding (the JSON
// columns cost a scan, nothing more). What follows DLE is a Unicode noncharacter, which no
// encoder produces from ordinary text: a row written before this encoding (which may hold raw
// NULs on SQLite, and on either dialect a raw DLE from binary output) decodes to itself unless
// it holds DLE immediately followed by U+FDD0, U+FDD1 or U+FDD2. Raw NULs of old SQLite rows are
// left as they are. Nothing here imports Kysely: the Kysely-free reader uses it too.

const ESC = '\u0010'
const NUL = '\u0000'
const ESCAPED_NUL = '\u0010\uFDD0'
const ESCAPED_ESC = '\u0010\uFDD1'
const ESCAPED_SURROGATE = '\u0010\uFDD2'

/** NUL, DLE, and surrogates not part of a pair. */
const NEEDS_ESCAPE = /\u0000|\u0010|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g
const ESCAPED = /\u0010(?:\uFDD0|\uFDD1|\uFDD2([\uE000-\uE7FF]))/g

/** `String.prototype.isWellFormed` (ES2024, Node 20): no lone surrogate. Native, unlike a regex. */
const isWellFormed = (text: string): boolean => (text as unknown as { isWellFormed(): boolean }).isWellFormed()

const escapeOne = (char: string): string =>
  char === NUL ? ESCAPED_NUL : char === ESC ? ESCAPED_ESC : ESCAPED_SURROGATE + String.fromCharCode(char.charCodeAt(0) - 0xd800 + 0xe000)

const unescapeOne = (match: string, surrogate: string | undefined): string =>
  surrogate !== undefined ? String.fromCharCode(surrogate.charCodeAt(0) - 0xe000 + 0xd800) : match.charCodeAt(1) === 0xfdd0 ? NUL : ESC

/**
 * A text value as the store holds it. Text with no NUL, no DLE and no lone surrogate (nearly all
 * text, and all JSON text) is returned as it is, after three native scans and no allocation.
 */
export const encodeText = (text: string): string =>
  text.indexOf(NUL) === -1 && text.indexOf(ESC) === -1 && isWellFormed(text) ? text : text.replace(NEEDS_ESCAPE, escapeOne)

/** The text a stored value stands for: `encodeText` undone; text without DLE is returned as it is. */
export const decodeText = (stored: string): string => (stored.indexOf(ESC) === -1 ? stored : stored.replace(ESCAPED, unescapeOne))

/** Query parameters with their text encoded: the same array when none changes (nearly always). */
export const encodeParams = <P extends ReadonlyArray<unknown>>(params: P): P => {
  let encoded: unknown[] | undefined
  for (let i = 0; i < params.length; i++) {
    const value = params[i]
    if (typeof value !== 'string') continue
    const text = encodeText(value)
    if (text !== value) {
      encoded ??= [...params]
      encoded[i] = text
    }
  }
  return (encoded ?? params) as P
}

/** Decodes every text value of a row read from the store, in place (rows are the driver's fresh objects). */
export const decodeRow = <R>(row: R): R => {
  if (typeof row !== 'object' || row === null) return row
  const values = row as Record<string, unknown>
  for (const key in values) {
    const value = values[key]
    if (typeof value === 'string' && value.indexOf(ESC) !== -1) values[key] = decodeText(value)
  }
  return row
}

/** `decodeRow` over every row, in place. */
export const decodeRows = <R>(rows: R[]): R[] => {
  for (const row of rows) decodeRow(row)
  return rows
}

/** An escaped backslash (skipped whole, so `\\u0010` is never read as an escape), or a DLE escape. */
const ESCAPED_IN_JSON = /\\\\|\\u0010(?:\uFDD0|\uFDD1|\uFDD2([\uE000-\uE7FF]))/g

/**
 * JSON that the database wrote from stored text (SQLite's `json_object`), as `JSON.stringify`
 * would write the decoded text: DLE comes out of SQLite as `\u0010`, and the noncharacter after it
 * as itself.
 */
export const decodeJsonText = (json: string): string =>
  json.indexOf('\\u0010') === -1
    ? json
    : json.replace(ESCAPED_IN_JSON, (match: string, surrogate: string | undefined) => {
        if (match === '\\\\') return match
        if (surrogate !== undefined) return `\\u${(surrogate.charCodeAt(0) - 0xe000 + 0xd800).toString(16)}`
        return match.charCodeAt(6) === 0xfdd0 ? '\\u0000' : '\\u0010'
      })

/** In JSON text: an escaped backslash (skipped whole), an escaped NUL or DLE, or an escaped surrogate. */
const TO_ESCAPE_IN_JSON = /\\\\|\\u00(?:00|10)|\\ud[89a-f][0-9a-f]{2}/g

const escapeInJson = (match: string): string => {
  if (match === '\\\\') return match
  if (match === '\\u0000') return '\\u0010\uFDD0'
  if (match === '\\u0010') return '\\u0010\uFDD1'
  return `\\u0010\uFDD2${String.fromCharCode(Number.parseInt(match.slice(2), 16) - 0xd800 + 0xe000)}`
}

/**
 * `JSON.stringify` output with every string in it (keys aside, which are the store's own ASCII
 * names) encoded as `encodeText` would encode it, without walking the value: what the PostgreSQL
 * run writer sends as one `jsonb` argument. `JSON.stringify` writes NUL and DLE as `\u0000` and
 * `\u0010` and escapes only the surrogates that are not part of a pair, so these escapes are
 * exactly the characters the codec replaces; the result holds DLE escaped (`\u0010`, JSON allows
 * no raw control character) followed by the codec's noncharacter.
 */
export const encodeJsonText = (json: string): string =>
  json.indexOf('\\u00') === -1 && json.indexOf('\\ud') === -1 ? json : json.replace(TO_ESCAPE_IN_JSON, escapeInJson)
