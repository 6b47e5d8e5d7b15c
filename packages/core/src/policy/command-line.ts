/**
 * A small lexer for the `/bin/sh -c` command lines the `exec` tool runs. It does not execute or
 * expand anything: it finds the simple commands a line would run (so a policy can judge each one)
 * and the constructs whose effect a glob on the command text cannot see (so a policy never
 * auto-allows them). When in doubt it reports more segments or more risk, never less.
 */

import { dequoteShellWord } from './command-readings.js'

/** Constructs that are never auto-allowed, whatever the rules say. */
export const RiskKind = {
  redirection: 'redirection',
  commandSubstitution: 'command-substitution',
  processSubstitution: 'process-substitution',
  background: 'background',
  subshell: 'subshell',
  unparsed: 'unparsed'
} as const
export type RiskKind = (typeof RiskKind)[keyof typeof RiskKind]

/** One risky construct and its text as written (for `unparsed`: the rest of the line from where parsing gave up). */
export interface RiskyConstruct {
  readonly kind: RiskKind
  readonly text: string
}

/** The simple commands of a command line, in the order they appear, and what makes it risky. */
export interface CommandAnalysis {
  /**
   * Each simple command as written (trimmed), outer before inner: `echo $(cat a)` gives
   * `echo $(cat a)` and `cat a`. Commands inside substitutions, subshells and backticks are
   * segments too, so a deny rule sees them.
   */
  readonly segments: ReadonlyArray<string>
  readonly risky: ReadonlyArray<RiskyConstruct>
}

/** Thrown only inside this module; `analyzeCommand` turns it into an `unparsed` risk. */
class Unparsable {
  constructor(
    readonly at: number,
    readonly reason: string
  ) {}
}

interface PendingHeredoc {
  readonly at: number
  readonly delimiter: string
  readonly stripTabs: boolean
  /** An unquoted delimiter means the body undergoes `$(...)` and backtick expansion. */
  readonly expands: boolean
}

interface ScanState {
  readonly src: string
  readonly segments: string[]
  readonly risky: RiskyConstruct[]
  heredocs: PendingHeredoc[]
  /** Where the top-level segment in progress began, for the fallback segment when parsing fails. */
  topSegmentStart: number
  topSlot: number
}

/** Characters that end an unquoted word. */
const isMeta = (c: string | undefined): boolean => c !== undefined && ' \t\n;&|<>()'.includes(c)
const isBlank = (c: string | undefined): boolean => c === ' ' || c === '\t'

/** Targets a redirection may name without touching a workspace file. */
const HARMLESS_INPUT = new Set(['/dev/null'])
const HARMLESS_OUTPUT = new Set(['/dev/null', '/dev/stdout', '/dev/stderr'])

/**
 * The simple command being read in one list: its text so far, and its slot in `state.segments`,
 * reserved when its first word is seen so that outer commands precede the commands nested in
 * them. A top-level one also tells `state` where it began, for the fallback segment when
 * parsing fails.
 */
class SegmentInProgress {
  private buffer = ''
  private slot = -1
  /** The next character starts a word (where `#` starts a comment). */
  wordStart = true

  constructor(
    private readonly state: ScanState,
    private readonly top: boolean
  ) {}

  get text(): string {
    return this.buffer
  }

  reserve(): void {
    if (this.slot !== -1) return
    this.slot = this.state.segments.push('') - 1
    if (this.top) this.state.topSlot = this.slot
  }

  append(text: string): void {
    this.buffer += text
  }

  /** Ends the segment; the next one begins at `next`. */
  flush(next: number): void {
    if (this.slot !== -1) this.state.segments[this.slot] = this.buffer.trim()
    this.buffer = ''
    this.slot = -1
    this.wordStart = true
    if (this.top) {
      this.state.topSegmentStart = next
      this.state.topSlot = -1
    }
  }
}

/**
 * Scans a command list up to `closer` (`)` for `$(`, `(`, `<(`, `>(`) or to the end. Returns the
 * index just after the closer. Each list keeps its own segment (`SegmentInProgress`).
 */
const scanList = (state: ScanState, start: number, closer: ')' | undefined, openedAt: number): number => {
  const { src } = state
  const top = closer === undefined
  const segment = new SegmentInProgress(state, top)
  let i = start
  // A piece of the segment's words read by `scan` from `i`: the slot is reserved before the
  // scan, which may find nested commands.
  const take = (scan: (at: number) => number): void => {
    segment.reserve()
    const end = scan(i)
    segment.append(src.slice(i, end))
    i = end
    segment.wordStart = false
  }

  while (i < src.length) {
    const c = src[i]!
    const next = src[i + 1]
    if (c === ')') {
      if (top) throw new Unparsable(i, 'unbalanced ")"')
      segment.flush(i + 1)
      return i + 1
    }
    if (c === '\n') {
      const after = readHeredocBodies(state, i + 1)
      segment.flush(after)
      i = after
    } else if (c === ';') {
      segment.flush(i + 1)
      i += 1
    } else if (c === '|') {
      const length = next === '|' || next === '&' ? 2 : 1
      segment.flush(i + length)
      i += length
    } else if (c === '&' && next === '&') {
      segment.flush(i + 2)
      i += 2
    } else if (c === '&' && next === '>') {
      take((at) => scanRedirection(state, at))
    } else if (c === '&') {
      state.risky.push({ kind: RiskKind.background, text: `${segment.text.trim()} &`.trim() })
      segment.flush(i + 1)
      i += 1
    } else if (c === '\\' && next === '\n') {
      // A line continuation joins the two lines into one word list.
      segment.append(' ')
      i += 2
      segment.wordStart = true
    } else if (isBlank(c)) {
      segment.append(c)
      i += 1
      segment.wordStart = true
    } else if (c === '#' && segment.wordStart) {
      while (i < src.length && src[i] !== '\n') i += 1
    } else if ((c === '<' || c === '>') && next === '(') {
      take((at) => scanNested(state, at, 2, RiskKind.processSubstitution))
    } else if (c === '<' || c === '>') {
      take((at) => scanRedirection(state, at))
    } else if (c === '(') {
      // The group itself is not a command; the commands inside it become segments.
      i = scanNested(state, i, 1, RiskKind.subshell)
      segment.wordStart = false
    } else {
      take((at) => scanWordPart(state, at))
    }
  }
  if (!top) throw new Unparsable(openedAt, 'unbalanced "("')
  segment.flush(i)
  return i
}

/** A `$(`, `(`, `<(` or `>(` construct: records the risk (before what it contains) and scans the inner list. */
const scanNested = (state: ScanState, at: number, openLength: number, kind: RiskKind): number => {
  const position = state.risky.length
  const end = scanList(state, at + openLength, ')', at)
  state.risky.splice(position, 0, { kind, text: state.src.slice(at, end) })
  return end
}

/** One piece of a word: a quoted string, an escape, an expansion, or a single plain character. */
const scanWordPart = (state: ScanState, at: number): number => {
  const { src } = state
  const c = src[at]!
  const next = src[at + 1]
  if (c === '\\') {
    if (next === undefined) throw new Unparsable(at, 'dangling "\\"')
    return at + 2
  }
  if (c === "'") {
    const close = src.indexOf("'", at + 1)
    if (close === -1) throw new Unparsable(at, 'unbalanced single quote')
    return close + 1
  }
  if (c === '"') return scanDoubleQuoted(state, at)
  if (c === '`') return scanBackticks(state, at)
  if (c === '$' && next === '(') {
    // `$((1+2))` is arithmetic in bash, but a shell may fall back to a command substitution, so
    // it is judged like one: never auto-allowed.
    return scanNested(state, at, 2, RiskKind.commandSubstitution)
  }
  if (c === '$' && next === '{') return scanParameter(state, at)
  if (c === '$' && next === "'") return scanAnsiQuoted(src, at)
  return at + 1
}

const scanDoubleQuoted = (state: ScanState, at: number): number => {
  const { src } = state
  let j = at + 1
  while (j < src.length) {
    const c = src[j]!
    if (c === '\\') j += 2
    else if (c === '"') return j + 1
    else if (c === '`') j = scanBackticks(state, j)
    else if (c === '$' && src[j + 1] === '(') j = scanNested(state, j, 2, RiskKind.commandSubstitution)
    else j += 1
  }
  throw new Unparsable(at, 'unbalanced double quote')
}

/** `$'...'`: backslash escapes are live inside, so `\'` does not close it. */
const scanAnsiQuoted = (src: string, at: number): number => {
  let j = at + 2
  while (j < src.length) {
    if (src[j] === '\\') j += 2
    else if (src[j] === "'") return j + 1
    else j += 1
  }
  throw new Unparsable(at, "unbalanced $' quote")
}

/** `${...}`: its text is one word (`;` inside does not split), but substitutions inside still run. */
const scanParameter = (state: ScanState, at: number): number => {
  const { src } = state
  let j = at + 2
  while (j < src.length) {
    const c = src[j]!
    if (c === '}') return j + 1
    if (c === '\\') j += 2
    else if (c === "'") {
      const close = src.indexOf("'", j + 1)
      if (close === -1) throw new Unparsable(j, 'unbalanced single quote')
      j = close + 1
    } else if (c === '"') j = scanDoubleQuoted(state, j)
    else if (c === '`') j = scanBackticks(state, j)
    else if (c === '$' && src[j + 1] === '(') j = scanNested(state, j, 2, RiskKind.commandSubstitution)
    else if (c === '$' && src[j + 1] === '{') j = scanParameter(state, j)
    else j += 1
  }
  throw new Unparsable(at, 'unbalanced "${"')
}

/**
 * A backtick substitution. Its body is a command line of its own once the backtick-level escapes
 * (`` \` ``, `\\`, `\$`) are undone, so it is analysed recursively.
 */
const scanBackticks = (state: ScanState, at: number): number => {
  const { src } = state
  let j = at + 1
  while (j < src.length && src[j] !== '`') j += src[j] === '\\' ? 2 : 1
  if (j >= src.length) throw new Unparsable(at, 'unbalanced backtick')
  state.risky.push({ kind: RiskKind.commandSubstitution, text: src.slice(at, j + 1) })
  const inner = analyzeCommand(src.slice(at + 1, j).replace(/\\([\\`$])/g, '$1'))
  state.segments.push(...inner.segments)
  state.risky.push(...inner.risky)
  return j + 1
}

/** Reads the word after a redirection operator; blanks before it are skipped. */
const readWord = (state: ScanState, at: number): { readonly end: number; readonly text: string } => {
  const { src } = state
  let start = at
  while (isBlank(src[start])) start += 1
  if ((src[start] === '<' || src[start] === '>') && src[start + 1] === '(') {
    const end = scanNested(state, start, 2, RiskKind.processSubstitution)
    return { end, text: src.slice(start, end) }
  }
  let end = start
  while (end < src.length && !isMeta(src[end])) end = scanWordPart(state, end)
  return { end, text: src.slice(start, end) }
}

/** The operators, longest first so `>>` is not read as `>`. */
const REDIRECTION_OPERATORS = ['&>>', '&>', '<<<', '<<-', '<<', '<>', '<&', '>>', '>|', '>&', '<', '>'] as const

/**
 * A redirection starting at `at`. Opening a file is risky (the policy's path rules never see it);
 * duplicating or closing a descriptor (`2>&1`, `>&2`, `<&-`) and `/dev/null` are not.
 */
const scanRedirection = (state: ScanState, at: number): number => {
  const { src } = state
  const operator = REDIRECTION_OPERATORS.find((op) => src.startsWith(op, at))!
  const word = readWord(state, at + operator.length)
  if (word.text === '') throw new Unparsable(at, `redirection "${operator}" without a target`)
  const target = dequoteShellWord(word.text)
  // Include the descriptor number (`2>`) in the reported text when it starts the word.
  let textStart = at
  while (textStart > 0 && /[0-9]/.test(src[textStart - 1]!)) textStart -= 1
  if (textStart > 0 && !isBlank(src[textStart - 1]) && !isMeta(src[textStart - 1])) textStart = at
  const text = src.slice(textStart, word.end)
  const risk = (kind: RiskKind): void => {
    state.risky.push({ kind, text })
  }

  switch (operator) {
    case '<<':
    case '<<-':
      state.heredocs.push({
        at,
        delimiter: target,
        stripTabs: operator === '<<-',
        expands: !/['"\\]/.test(word.text)
      })
      break
    case '<<<':
      break // a here-string is data on stdin, not a file
    case '>&':
    case '<&':
      // `>&word` with a non-number names a file (bash writes stdout and stderr to it).
      if (!/^(?:[0-9]+-?|-)$/.test(target) && !HARMLESS_OUTPUT.has(target)) risk(RiskKind.redirection)
      break
    case '&>':
    case '&>>':
      // POSIX sh (dash is /bin/sh on Debian) reads `cmd &>f` as `cmd &` then `>f`: the command
      // goes to the background, even with /dev/null.
      risk(RiskKind.background)
      if (!HARMLESS_OUTPUT.has(target)) risk(RiskKind.redirection)
      break
    case '<':
      if (!HARMLESS_INPUT.has(target)) risk(RiskKind.redirection)
      break
    default:
      if (!HARMLESS_OUTPUT.has(target)) risk(RiskKind.redirection)
  }
  return word.end
}

/** After a newline: the bodies of the here-documents opened on the line just ended. */
const readHeredocBodies = (state: ScanState, at: number): number => {
  const { src } = state
  let i = at
  const pending = state.heredocs
  state.heredocs = []
  for (const heredoc of pending) {
    const bodyStart = i
    let found = false
    while (i < src.length) {
      const newline = src.indexOf('\n', i)
      const lineEnd = newline === -1 ? src.length : newline
      const line = src.slice(i, lineEnd)
      const next = newline === -1 ? src.length : newline + 1
      if ((heredoc.stripTabs ? line.replace(/^\t+/, '') : line) === heredoc.delimiter) {
        if (heredoc.expands) scanExpansions(state, bodyStart, i)
        i = next
        found = true
        break
      }
      i = next
    }
    if (!found) throw new Unparsable(heredoc.at, `here-document without its closing "${heredoc.delimiter}" line`)
  }
  return i
}

/** Command substitutions in an expanding here-document body still run. */
const scanExpansions = (state: ScanState, from: number, to: number): void => {
  const { src } = state
  let j = from
  while (j < to) {
    if (src[j] === '\\') j += 2
    else if (src[j] === '`') j = scanBackticks(state, j)
    else if (src[j] === '$' && src[j + 1] === '(') j = scanNested(state, j, 2, RiskKind.commandSubstitution)
    else j += 1
  }
}

/**
 * Splits a command line into the simple commands it runs and the risky constructs it uses.
 * Respects single quotes, double quotes, `$'...'`, backslash escapes, comments and
 * here-documents; splits on `&&`, `||`, `;`, `|`, `&` and newlines. Leading variable assignments
 * stay part of their segment. A line it cannot parse (unbalanced quote or parenthesis) yields an
 * `unparsed` risk, and the unparsed rest of the line is kept as one segment so rules still see it.
 *
 * @example
 * analyzeCommand('npm test 2>&1 | tee log.txt')
 * // { segments: ['npm test 2>&1', 'tee log.txt'], risky: [] }
 */
export const analyzeCommand = (command: string): CommandAnalysis => {
  const state: ScanState = { src: command, segments: [], risky: [], heredocs: [], topSegmentStart: 0, topSlot: -1 }
  try {
    scanList(state, 0, undefined, 0)
    const [unfinished] = state.heredocs
    if (unfinished !== undefined) {
      throw new Unparsable(unfinished.at, `here-document without its closing "${unfinished.delimiter}" line`)
    }
  } catch (error) {
    if (!(error instanceof Unparsable)) throw error
    state.risky.push({ kind: RiskKind.unparsed, text: command.slice(error.at).trim() })
    const rest = command.slice(state.topSegmentStart).trim()
    if (state.topSlot !== -1) state.segments[state.topSlot] = rest
    else if (rest !== '') state.segments.push(rest)
  }
  return { segments: state.segments.filter((segment) => segment !== ''), risky: state.risky }
}
