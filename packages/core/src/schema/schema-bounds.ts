import { jsonPointer } from './json-schema-check.js'

/*
 * How large a tool's JSON Schema may be (docs/tools.md, "Bounds on a tool's schema"). A tool's
 * schema is sent to the model with every request and compiled by Ajv, both recursive: a schema
 * nested thousands of levels overflows the stack of whatever touches it, and a 200,000-value
 * enum costs megabytes per request. Real schemas are far inside these bounds: the largest of
 * @modelcontextprotocol/server-everything's nests 4 levels and is under 1 KiB.
 */

/** The bounds every tool's schema (a defined tool's `input`, an MCP tool's `inputSchema` and `outputSchema`) must keep. */
export const TOOL_SCHEMA_BOUNDS = {
  /** Objects and arrays inside one another, the schema itself being level 1 (as for task files and arguments). */
  maxDepth: 64,
  /** Items of any one array: an `enum`, `required`, `anyOf`, `examples`... */
  maxListItems: 1_000,
  /** Characters of the schema as JSON. */
  maxJsonChars: 64 * 1024
} as const

/**
 * Why `schema` is outside `TOOL_SCHEMA_BOUNDS`, as a clause to put after what it is
 * (`nests deeper than 64 levels (at /properties/next/properties/next/...)`), or undefined when it
 * is inside them. Walked with an explicit stack and stopped at the first bound passed, so a
 * hostile schema costs at most the bounds' worth of work: never a stack overflow, and a cyclic
 * object is simply too deep.
 */
export const toolSchemaOutOfBounds = (schema: unknown): string | undefined => {
  const { maxDepth, maxListItems, maxJsonChars } = TOOL_SCHEMA_BOUNDS
  interface Frame {
    readonly value: unknown
    readonly depth: number
    readonly key: string
    readonly parent: Frame | undefined
  }
  const pointer = (frame: Frame): string => {
    const path: string[] = []
    for (let at: Frame | undefined = frame; at?.parent !== undefined; at = at.parent) path.push(at.key)
    return jsonPointer(path.reverse())
  }
  // A lower bound of the JSON text's length, counted as the walk goes: it stops a huge schema
  // early; the exact length is measured once the walk found the schema shallow.
  let chars = 0
  const stack: Frame[] = [{ value: schema, depth: 1, key: '', parent: undefined }]
  while (stack.length > 0) {
    const frame = stack.pop()!
    const value = frame.value
    if (typeof value === 'string') chars += value.length + 2
    else if (typeof value !== 'object' || value === null) chars += String(value).length
    else {
      if (frame.depth > maxDepth) return `nests deeper than ${maxDepth} levels (at ${truncatedPointer(pointer(frame))})`
      if (Array.isArray(value)) {
        if (value.length > maxListItems) return `has a list of ${value.length} items at ${truncatedPointer(pointer(frame))}, more than ${maxListItems}`
        chars += 2 + value.length
        for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], depth: frame.depth + 1, key: String(i), parent: frame })
      } else {
        const keys = Object.keys(value)
        chars += 2 + keys.length
        for (let i = keys.length - 1; i >= 0; i--) {
          const key = keys[i]!
          chars += key.length + 3
          stack.push({ value: (value as Record<string, unknown>)[key], depth: frame.depth + 1, key, parent: frame })
        }
      }
    }
    if (chars > maxJsonChars) return `is larger than ${maxJsonChars / 1024} KiB as JSON`
  }
  // Shallow and small by now: serialising it cannot overflow.
  let length: number
  try {
    length = JSON.stringify(schema)?.length ?? 0
  } catch {
    // A getter that throws, a BigInt: the caller's own serialisation reports it.
    return undefined
  }
  return length > maxJsonChars ? `is larger than ${maxJsonChars / 1024} KiB as JSON (${length} characters)` : undefined
}

/** A pointer at most a line's worth long: one 64 levels deep is mostly the same segment. */
const truncatedPointer = (pointer: string): string => (pointer.length <= 120 ? pointer : `${pointer.slice(0, 117)}...`)
