import { Ajv, type ValidateFunction } from 'ajv'
import { Either } from 'effect'

/**
 * JSON Schemas written by a task's author (an agent's `output`) or a tool's (its input), checked
 * with Ajv: every error at once, the keywords Ajv does not know ignored rather than refused (a
 * schema written for a model carries `title`s, `examples` and vendor keys), formats not enforced
 * (they would need a plugin per format; a model is told the format by the schema anyway).
 */
const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false })

/** One reason a value does not fit its schema: where (a JSON pointer, `/` for the whole value) and what. */
export interface SchemaViolation {
  readonly pointer: string
  readonly message: string
}

/** A compiled schema: the violations of a value, none when it fits. */
export type JsonSchemaCheck = (value: unknown) => ReadonlyArray<SchemaViolation>

// Compiled once per schema text: a contract is parsed again at every resume.
const compiled = new Map<string, JsonSchemaCheck>()
const MAX_COMPILED = 256

const violationsOf = (validate: ValidateFunction): ReadonlyArray<SchemaViolation> =>
  (validate.errors ?? []).map((error) => ({ pointer: error.instancePath === '' ? '/' : error.instancePath, message: error.message ?? 'is not valid' }))

/**
 * The check of `schema`, or why it is no usable schema (one line). An agent's result and a
 * tool's arguments are JSON objects, so `objectOnly` also asks for `"type": "object"`.
 */
export const compileJsonSchema = (schema: unknown, objectOnly: boolean): Either.Either<JsonSchemaCheck, string> => {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return Either.left('must be a JSON Schema object')
  if (objectOnly && (schema as { type?: unknown }).type !== 'object') return Either.left('must be a JSON Schema of "type": "object"')
  const key = JSON.stringify(schema)
  const known = compiled.get(key)
  if (known !== undefined) return Either.right(known)
  let validate: ValidateFunction
  try {
    validate = ajv.compile(schema)
  } catch (error) {
    return Either.left(`is not a valid JSON Schema: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`)
  }
  const check: JsonSchemaCheck = (value) => (validate(value) ? [] : violationsOf(validate))
  if (compiled.size < MAX_COMPILED) compiled.set(key, check)
  return Either.right(check)
}

/** Violations as one line for the model: `/facts: must be array; /: must have required property 'summary'`. */
export const describeViolations = (violations: ReadonlyArray<SchemaViolation>): string =>
  violations.map((violation) => `${violation.pointer}: ${violation.message}`).join('; ')
