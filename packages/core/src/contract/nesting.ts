/**
 * How deeply nested the JSON agentvisor accepts may be (docs/task-file.md, "Limits on input").
 * Recursive code (Schema decoding, `JSON.stringify`, the SDKs' serialisers, the YAML parser)
 * overflows the stack somewhere between a few hundred and a few thousand levels; real task files
 * and tool arguments stay within a dozen. Everything here is iterative, so checking never
 * overflows itself.
 */

/** The deepest nesting (objects and lists inside one another) of a task file or of tool arguments. */
export const MAX_NESTING_DEPTH = 64

/**
 * Whether JSON text nests objects/arrays deeper than `limit` (the outermost one is level 1).
 * A scan of the text, not a parse: one pass, no allocation, and malformed text is simply
 * scanned (its parser reports it).
 */
export const jsonTextTooDeep = (text: string, limit: number = MAX_NESTING_DEPTH): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c)
        i++ // a backslash escapes the next character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) {
      inString = true
    } else if (c === 0x7b || c === 0x5b) {
      depth++
      if (depth > limit) return true
    } else if (c === 0x7d || c === 0x5d) {
      depth--
    }
  }
  return false
}

/**
 * The path to the first place where `value` nests deeper than `limit`, or undefined when it
 * does not. Walked with an explicit stack, so a cyclic object is reported as too deep rather
 * than looping or overflowing.
 */
export const valueTooDeepAt = (value: unknown, limit: number = MAX_NESTING_DEPTH): ReadonlyArray<string> | undefined => {
  // Nearly every value is shallow: one walk that allocates nothing says so (a scripted provider's
  // arguments are checked at every call, docs/architecture.md, "The hot path"), and only a value
  // that is too deep is walked again for its path.
  if (typeof value !== 'object' || value === null || !nestsDeeper(value, 1, limit)) return undefined
  return tooDeepPath(value, limit)
}

/**
 * Whether `value`, at `depth`, nests deeper than `limit`: the same children `Object.entries`
 * gives (own enumerable string keys), recursing at most `limit + 1` calls deep whatever the value
 * (a cycle is too deep), allocating nothing.
 */
const nestsDeeper = (value: object, depth: number, limit: number): boolean => {
  if (depth > limit) return true
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue
    const child = (value as Record<string, unknown>)[key]
    if (typeof child === 'object' && child !== null && nestsDeeper(child, depth + 1, limit)) return true
  }
  return false
}

/** The path to the first place where `value` (too deep) nests deeper than `limit`. */
const tooDeepPath = (value: object, limit: number): ReadonlyArray<string> | undefined => {
  interface Frame {
    readonly value: object
    readonly depth: number
    readonly key: string
    readonly parent: Frame | undefined
  }
  const stack: Frame[] = [{ value, depth: 1, key: '', parent: undefined }]
  while (stack.length > 0) {
    const frame = stack.pop()!
    if (frame.depth > limit) {
      const path: string[] = []
      for (let f: Frame | undefined = frame; f?.parent !== undefined; f = f.parent) path.push(f.key)
      return path.reverse()
    }
    for (const [key, child] of Object.entries(frame.value)) {
      if (typeof child === 'object' && child !== null) stack.push({ value: child, depth: frame.depth + 1, key, parent: frame })
    }
  }
  return undefined
}

/** Whether an error is a stack overflow (V8's `RangeError`, or a parser's error wrapping its message). */
export const isStackOverflow = (error: unknown): boolean => error instanceof Error && error.message.includes('Maximum call stack size exceeded')

/** A value written as an object literal or parsed from JSON: not an array, a class instance or null. */
export const isPlainObject = (value: unknown): value is Record<string, unknown> => {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}
