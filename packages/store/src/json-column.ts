// How a `*_json` column is read back: through its own Schema (defined beside its table, in
// `tables/*.columns.ts`), once, at the store boundary. A row that does not decode is reported as
// a `StoreError` naming the run, the table and the column, never cast into shape or skipped
// (docs/durability.md, "Corrupt rows").
import * as Either from 'effect/Either'
import * as ParseResult from 'effect/ParseResult'
import * as Schema from 'effect/Schema'
import { StoreError } from './errors.js'

/** A JSON column's text decoded to `A`, or a one-line reason why it does not. */
export type JsonColumn<A> = (text: string) => Either.Either<A, string>

/** The longest reason quoted in an error: a whole tool output or contract would flood the line. */
const MAX_REASON = 200

/**
 * Compiles a column's Schema (normally `Schema.parseJson(...)`) into its decoder. Fields the
 * Schema does not name are kept as written: the Schema checks what the code reads, it does not
 * reshape a row.
 */
export const jsonColumn = <A>(schema: Schema.Schema<A, string>): JsonColumn<A> => {
  const decode = Schema.decodeUnknownEither(schema, { onExcessProperty: 'preserve' })
  return (text) => Either.mapLeft(decode(text), (error) => describeIssue(error, text))
}

const describeValue = (value: unknown): string =>
  value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value === 'object' ? 'an object' : `a ${typeof value}`

const valueAt = (text: string, at: ReadonlyArray<PropertyKey>): unknown => {
  let value: unknown = JSON.parse(text)
  for (const key of at) value = typeof value === 'object' && value !== null ? (value as Record<PropertyKey, unknown>)[key] : undefined
  return value
}

/**
 * Effect's first issue as one line: where in the value (`[2].output`) and what is wrong. Effect
 * spells an expected object or list by printing its whole type and the whole value: those say
 * which kind was expected and which kind was found instead.
 */
const describeIssue = (error: ParseResult.ParseError, text: string): string => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  if (issue === undefined) return error.message.split('\n')[0]!
  let path: ReadonlyArray<PropertyKey> = issue.path
  let detail = issue.message.split('\n')[0]!
  // An empty list where one item at least is required: Effect says its first item is missing.
  const parent = issue._tag === 'Missing' && path.length > 0 ? valueAt(text, path.slice(0, -1)) : undefined
  if (Array.isArray(parent) && parent.length === 0) {
    path = path.slice(0, -1)
    detail = 'must not be empty'
  }
  const at = path.map((key) => (typeof key === 'number' ? `[${key}]` : `.${String(key)}`)).join('')
  // Only a Type issue is about a value; the text parsed, or parseJson would have said so.
  if (issue._tag === 'Type' && detail.startsWith('Expected {')) detail = `Expected an object, got ${describeValue(valueAt(text, path))}`
  else if (issue._tag === 'Type' && (detail.startsWith('Expected ReadonlyArray<') || detail.startsWith('Expected readonly ['))) {
    detail = `Expected a list, got ${describeValue(valueAt(text, path))}`
  }
  const reason = at === '' ? detail : `${at.replace(/^\./, '')}: ${detail}`
  return reason.length > MAX_REASON ? `${reason.slice(0, MAX_REASON)}…` : reason
}

/** Where a column's value was read: the run, `table.column`, and the row within the run. */
export interface ColumnAt {
  readonly runId: string
  readonly column: string
  /** The row among the run's rows (`step 4`), when the run has several. */
  readonly row?: string | undefined
}

/**
 * The column's value, or a thrown `StoreError` naming the run and the column: every repository
 * and `RunWriter` read rejects (or throws, on SQLite's synchronous path) with it.
 */
export const decodeJsonAt = <A>(decode: JsonColumn<A>, text: string, at: ColumnAt): A => {
  const decoded = decode(text)
  if (Either.isRight(decoded)) return decoded.right
  throw new StoreError({
    message: `run ${at.runId} has a corrupt ${at.column}${at.row === undefined ? '' : ` (${at.row})`}: ${decoded.left}`,
    runId: at.runId,
    column: at.column
  })
}
