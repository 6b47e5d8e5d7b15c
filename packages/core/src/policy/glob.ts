import { Either } from 'effect'

/**
 * What a glob is matched against: a normalised workspace-relative POSIX path, or one segment of
 * a shell command line.
 */
export const GlobMode = { path: 'path', command: 'command' } as const
export type GlobMode = (typeof GlobMode)[keyof typeof GlobMode]

/** A compiled glob: true when the whole subject matches. */
export type GlobMatcher = (subject: string) => boolean

/** Why a glob was refused; `compilePolicy` turns it into a `ContractError` naming the field. */
export interface GlobSyntaxError {
  readonly pattern: string
  readonly message: string
}

type Token =
  | { readonly kind: 'literal'; readonly text: string }
  | { readonly kind: 'slash' }
  | { readonly kind: 'star' }
  | { readonly kind: 'globstar' }
  | { readonly kind: 'any-char' }
  | { readonly kind: 'class'; readonly negated: boolean; readonly body: string }
  | { readonly kind: 'braces'; readonly alternatives: ReadonlyArray<ReadonlyArray<Token>> }

/** Thrown only inside this module and turned into a `GlobSyntaxError` by `compileGlob`. */
class GlobParseFailure {
  constructor(readonly message: string) {}
}

const escapeRegExp = (text: string): string => text.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')

/** Characters of a bracket expression, escaped for a RegExp class (ranges keep their `-`). */
const escapeClassBody = (body: string): string => body.replace(/[\\\]^[]/g, '\\$&')

/**
 * Recursive-descent parser for path globs. `inBraces` makes `,` and `}` end the sequence so one
 * parser handles both the top level and every brace alternative.
 */
const parsePathSequence = (pattern: string, start: number, inBraces: boolean): { tokens: Token[]; end: number } => {
  const tokens: Token[] = []
  let i = start
  while (i < pattern.length) {
    const c = pattern[i]!
    if (inBraces && (c === ',' || c === '}')) return { tokens, end: i }
    if (c === '\\') {
      if (i + 1 >= pattern.length) throw new GlobParseFailure('dangling "\\" at the end')
      tokens.push({ kind: 'literal', text: pattern[i + 1]! })
      i += 2
    } else if (c === '/') {
      tokens.push({ kind: 'slash' })
      i += 1
    } else if (c === '*') {
      let j = i
      while (pattern[j] === '*') j += 1
      // `**` only spans folders when it is a whole segment (`a/**/b`); inside a name
      // (`a**b`) it means no more than `*`, as in bash's globstar.
      const previous = tokens[tokens.length - 1]
      const startsSegment = previous === undefined || previous.kind === 'slash'
      const next = pattern[j]
      const endsSegment = next === undefined || next === '/' || (inBraces && (next === ',' || next === '}'))
      tokens.push({ kind: j - i >= 2 && startsSegment && endsSegment ? 'globstar' : 'star' })
      i = j
    } else if (c === '?') {
      tokens.push({ kind: 'any-char' })
      i += 1
    } else if (c === '[') {
      const { token, end } = parseClass(pattern, i)
      tokens.push(token)
      i = end
    } else if (c === '{') {
      const alternatives: Token[][] = []
      let j = i + 1
      for (;;) {
        const alternative = parsePathSequence(pattern, j, true)
        alternatives.push(alternative.tokens)
        if (alternative.end >= pattern.length) throw new GlobParseFailure(`unbalanced "{" at ${i}`)
        j = alternative.end + 1
        if (pattern[alternative.end] === '}') break
      }
      tokens.push({ kind: 'braces', alternatives })
      i = j
    } else {
      tokens.push({ kind: 'literal', text: c })
      i += 1
    }
  }
  return { tokens, end: i }
}

/** `[abc]`, `[a-z]`, `[!x]` / `[^x]`; a `]` first in the class is literal, as in POSIX. */
const parseClass = (pattern: string, start: number): { token: Token; end: number } => {
  let i = start + 1
  const negated = pattern[i] === '!' || pattern[i] === '^'
  if (negated) i += 1
  let body = ''
  let first = true
  while (i < pattern.length && (pattern[i] !== ']' || first)) {
    if (pattern[i] === '\\') {
      if (i + 1 >= pattern.length) break
      // An escaped `-` is a literal dash, never a range.
      body += pattern[i + 1] === '-' ? '\\-' : escapeClassBody(pattern[i + 1]!)
      i += 2
    } else {
      // Keep `-` unescaped so ranges work; everything else that is special in a RegExp class is escaped.
      body += pattern[i] === '-' ? '-' : escapeClassBody(pattern[i]!)
      i += 1
    }
    first = false
  }
  if (i >= pattern.length) throw new GlobParseFailure(`unbalanced "[" at ${start}`)
  return { token: { kind: 'class', negated, body }, end: i + 1 }
}

const emitPath = (tokens: ReadonlyArray<Token>): string => {
  let out = ''
  for (let i = 0; i < tokens.length; i += 1) {
    const token = tokens[i]!
    const next = tokens[i + 1]
    switch (token.kind) {
      case 'literal':
        out += escapeRegExp(token.text)
        break
      case 'slash':
        // A trailing `/**` also matches the folder itself (zero segments), so a deny on
        // `secrets/**` covers listing `secrets` as well as everything below it.
        if (next?.kind === 'globstar' && i + 2 === tokens.length) {
          out += '(?:/.*)?'
          i += 1
        } else {
          out += '/'
        }
        break
      case 'globstar':
        if (next?.kind === 'slash') {
          out += '(?:.*/)?'
          i += 1
        } else {
          out += '.*'
        }
        break
      case 'star':
        out += '[^/]*'
        break
      case 'any-char':
        out += '[^/]'
        break
      case 'class':
        // A class never matches the separator, negated or not.
        out += token.negated ? `[^/${token.body}]` : `(?!/)[${token.body}]`
        break
      case 'braces':
        out += `(?:${token.alternatives.map(emitPath).join('|')})`
        break
    }
  }
  return out
}

const compilePathPattern = (pattern: string): string => {
  if (pattern.startsWith('/')) {
    throw new GlobParseFailure('path globs are workspace-relative and cannot start with "/"')
  }
  // `./src/**` reads naturally and means `src/**`; a folder written as `dir/` means all of it.
  let normalised = pattern.replace(/^(?:\.\/)+/, '')
  if (normalised.endsWith('/')) normalised += '**'
  if (normalised.split('/').includes('..')) {
    throw new GlobParseFailure('a ".." segment can never match a path inside the workspace')
  }
  if (normalised === '') throw new GlobParseFailure('the glob is empty')
  return emitPath(parsePathSequence(normalised, 0, false).tokens)
}

/** Command segments are compared with surrounding blanks trimmed and inner runs of blanks collapsed. */
export const normaliseCommandText = (text: string): string => text.trim().replace(/\s+/g, ' ')

const compileCommandPattern = (pattern: string): string => {
  const normalised = normaliseCommandText(pattern)
  if (normalised === '') throw new GlobParseFailure('the glob is empty')
  const parts: Array<{ readonly source: string; readonly unescaped: string | undefined }> = []
  for (let i = 0; i < normalised.length; i += 1) {
    const c = normalised[i]!
    if (c === '\\') {
      if (i + 1 >= normalised.length) throw new GlobParseFailure('dangling "\\" at the end')
      parts.push({ source: escapeRegExp(normalised[i + 1]!), unescaped: undefined })
      i += 1
    } else if (c === '*') {
      parts.push({ source: '.*', unescaped: c })
    } else if (c === '?') {
      parts.push({ source: '.', unescaped: c })
    } else {
      parts.push({ source: escapeRegExp(c), unescaped: c })
    }
  }
  // `git push *` must also cover a bare `git push`: otherwise a deny would miss the
  // argument-less form of exactly the command it names.
  const last = parts[parts.length - 1]
  const beforeLast = parts[parts.length - 2]
  if (last?.unescaped === '*' && beforeLast?.unescaped === ' ') {
    return `${parts
      .slice(0, -2)
      .map((p) => p.source)
      .join('')}(?: .*)?`
  }
  return parts.map((p) => p.source).join('')
}

/**
 * Compiles a glob to a matcher once, so evaluation never re-parses it.
 *
 * - `path`: `*` and `?` stay within one segment, `**` as a whole segment matches any depth
 *   including none (`secrets/**` matches `secrets`, `secrets/a`, `secrets/a/b`; `**\/*.ts`
 *   matches `a.ts`), `{a,b}` alternation (nestable), `[abc]` / `[a-z]` / `[!a]` classes, `\`
 *   escapes. A leading `./` is dropped and a trailing `/` means the folder and all below it.
 *   Dot-files get no special treatment: `**` covers `.env`.
 * - `command`: `*` matches anything (spaces and `/` included), `?` one character, `\` escapes;
 *   everything else, `[` and `{` included, is literal because both are ordinary in commands
 *   (`[ -f x ]`, `awk '{print}'`). A trailing ` *` also matches the bare command. Pattern and
 *   subject are compared with blanks trimmed and collapsed.
 *
 * @example
 * const m = Either.getOrThrow(compileGlob('secrets/**', 'path'))
 * m('secrets/a/b') // true
 */
export const compileGlob = (pattern: string, mode: GlobMode): Either.Either<GlobMatcher, GlobSyntaxError> => {
  let source: string
  let regex: RegExp
  try {
    source = mode === GlobMode.path ? compilePathPattern(pattern) : compileCommandPattern(pattern)
    // `s`: a quoted newline inside a command is still one segment and must not stop `*`.
    regex = new RegExp(`^${source}$`, 's')
  } catch (error) {
    if (error instanceof GlobParseFailure) return Either.left({ pattern, message: error.message })
    // The RegExp engine is the judge of what a parsed class means (`[z-a]` is out of order).
    if (error instanceof SyntaxError) return Either.left({ pattern, message: error.message })
    throw error
  }
  return Either.right(mode === GlobMode.path ? (subject: string) => regex.test(subject) : (subject: string) => regex.test(normaliseCommandText(subject)))
}

/**
 * Escapes every glob metacharacter so the glob matches `text` literally, in either mode: what a
 * remembered decision stores for the exact path or command that was approved.
 */
export const escapeGlob = (text: string): string => text.replace(/[\\*?[\]{}]/g, '\\$&')
