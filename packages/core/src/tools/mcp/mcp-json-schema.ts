import type { jsonSchemaValidator, JsonSchemaType, JsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js'
import { Either } from 'effect'
import { compileJsonSchemaCheck, describeViolations, type JsonSchemaCheck } from '../../schema/json-schema-check.js'
import { decodeArgumentsObject } from '../tool-arguments.js'
import type { ToolArguments } from '../tool-definition.js'

/*
 * Checking values against the JSON Schemas MCP servers publish: a tool's `inputSchema`, before a
 * call is sent, and its `outputSchema`, for the SDK (docs/tools.md, "MCP servers"). A schema
 * that cannot be compiled is not checked at all rather than failing its server: the server
 * still checks what it receives, and the check here only answers the model sooner and better.
 */

/**
 * The check of `schema`, or undefined when it cannot be compiled. Read leniently and taken as it
 * is, not judged against its meta-schema: nobody here can fix a server's schema. One that the
 * draft its `$schema` names cannot compile is tried as the other drafts before it is left
 * unchecked: a server's `$schema` does not always name the draft it wrote in (a 2020-12 one over
 * draft-07's array `items`, say).
 */
const compiledCheck = (schema: object): JsonSchemaCheck | undefined =>
  Either.getOrUndefined(compileJsonSchemaCheck(schema, { strictness: 'lenient', metaSchema: false, otherDrafts: true }))

/**
 * The `decode` of an MCP tool: the raw arguments text as a JSON object, checked against the
 * tool's `inputSchema`. The schema is compiled on the first call only, once: a server may list
 * tools a run never calls.
 */
export const argumentsDecoder = (inputSchema: object): ((raw: string) => Either.Either<ToolArguments, string>) => {
  let check: JsonSchemaCheck | null | undefined
  return (raw) => {
    const decoded = decodeArgumentsObject(raw)
    if (Either.isLeft(decoded)) return decoded
    if (check === undefined) check = compiledCheck(inputSchema) ?? null
    const violations = check === null ? [] : check(decoded.right)
    return violations.length === 0 ? decoded : Either.left(describeViolations(violations))
  }
}

/**
 * The SDK client's checker of `structuredContent` against a tool's `outputSchema`. The SDK's
 * default compiles every output schema when tools are listed and throws on one it cannot
 * compile (a 2020-12 `$schema`), which would fail the whole listing; this one compiles a schema
 * when a result first needs it, and lets a result through unchecked when it cannot be compiled.
 */
export const mcpOutputSchemaValidator: jsonSchemaValidator = {
  getValidator: <T>(schema: JsonSchemaType): JsonSchemaValidator<T> => {
    // Compiled on the first result, not when the tools are listed: a schema past the bounds of
    // docs/tools.md refuses its server after the listing, before Ajv ever sees it.
    let check: JsonSchemaCheck | null | undefined
    return (input) => {
      if (check === undefined) check = compiledCheck(schema as object) ?? null
      const violations = check === null ? [] : check(input)
      if (violations.length === 0) return { valid: true, data: input as T, errorMessage: undefined }
      return { valid: false, data: undefined, errorMessage: describeViolations(violations) }
    }
  }
}
