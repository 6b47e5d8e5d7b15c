import { Either } from 'effect'
import { compileJsonSchemaCheck, type JsonSchemaCheck } from '../schema/json-schema-check.js'

/*
 * An agent's `output` schema (docs/agents.md, "Structured results"), read leniently: a schema
 * written for a model carries `title`s, `examples` and vendor keys, which are ignored rather than
 * refused. It is still checked against its draft's meta-schema: its author can fix it, and a
 * mistake found when the task is read costs less than one found by the model.
 */

// Compiled once per schema text: a contract is parsed again at every resume.
const compiled = new Map<string, JsonSchemaCheck>()
const MAX_COMPILED = 256

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
  const check = compileJsonSchemaCheck(schema, { strictness: 'lenient' })
  if (Either.isLeft(check)) return Either.left(`is not a valid JSON Schema: ${check.left}`)
  if (compiled.size < MAX_COMPILED) compiled.set(key, check.right)
  return check
}
