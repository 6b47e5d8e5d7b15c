/**
 * How a restricting rule reads a command segment. A deny on `rm *` should not be dodged by
 * writing `FOO=1 rm`, `'r'm` or `/bin/rm`; an allow, though, must only ever match what is
 * written, so these readings are offered to deny and ask rules alone.
 */

const isBlank = (c: string | undefined): boolean => c === ' ' || c === '\t'

/**
 * Removes shell quoting the way the shell would before running a word: `'r'm` and `r\m` are
 * `rm`. Unbalanced quotes run to the end of the text.
 */
export const dequoteShellWord = (text: string): string => {
  let out = ''
  let i = 0
  while (i < text.length) {
    const c = text[i]!
    if (c === '\\') {
      out += text[i + 1] ?? ''
      i += 2
    } else if (c === "'") {
      const close = text.indexOf("'", i + 1)
      const end = close === -1 ? text.length : close
      out += text.slice(i + 1, end)
      i = end + 1
    } else if (c === '"') {
      i += 1
      while (i < text.length && text[i] !== '"') {
        if (text[i] === '\\' && '"\\$`'.includes(text[i + 1] ?? '')) i += 1
        out += text[i] ?? ''
        i += 1
      }
      i += 1
    } else {
      out += c
      i += 1
    }
  }
  return out
}

/** Splits a segment into its words, keeping each word's quoting as written. */
const splitWords = (segment: string): string[] => {
  const words: string[] = []
  let current = ''
  let i = 0
  while (i < segment.length) {
    const c = segment[i]!
    if (isBlank(c) || c === '\n') {
      if (current !== '') words.push(current)
      current = ''
      i += 1
    } else if (c === "'" || c === '"') {
      let close = i + 1
      while (close < segment.length && segment[close] !== c) close += c === '"' && segment[close] === '\\' ? 2 : 1
      current += segment.slice(i, close + 1)
      i = close + 1
    } else if (c === '\\') {
      current += segment.slice(i, i + 2)
      i += 2
    } else {
      current += c
      i += 1
    }
  }
  if (current !== '') words.push(current)
  return words
}

/** Words that may precede the command word of a simple command without being the command. */
const PREFIX_WORDS = new Set(['!', '{', 'if', 'then', 'else', 'elif', 'do', 'while', 'until', 'time'])
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*\+?=/

/**
 * The readings of a segment a restricting rule (deny, ask) is matched against, besides the
 * segment as written: without leading assignments and shell keywords (`FOO=1 rm x`,
 * `then rm x` -> `rm x`), with a path-qualified command word reduced to its name
 * (`/bin/rm x` -> `rm x`), and with quoting removed (`'r'm x` -> `rm x`). A permitting rule only
 * ever sees the segment as written, so no looser reading can make a command allowed.
 */
export const commandReadings = (segment: string): ReadonlyArray<string> => {
  const words = splitWords(segment)
  let first = 0
  while (first < words.length && (PREFIX_WORDS.has(words[first]!) || ASSIGNMENT.test(words[first]!))) first += 1
  const rest = words.slice(first)
  const commandWord = rest[0]
  if (commandWord !== undefined) {
    const name = dequoteShellWord(commandWord)
    if (name.includes('/') && !name.endsWith('/')) rest[0] = name.slice(name.lastIndexOf('/') + 1)
  }
  const bare = rest.join(' ')
  return [...new Set([segment, bare, dequoteShellWord(segment), dequoteShellWord(bare)])].filter((reading) => reading.trim() !== '')
}
