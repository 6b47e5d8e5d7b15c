import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv'
import { Ajv2020 } from 'ajv/dist/2020.js'
import type { jsonSchemaValidator, JsonSchemaType, JsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js'
import { Either } from 'effect'
import { decodeArgumentsObject } from '../tool-arguments.js'
import type { ToolArguments } from '../tool-definition.js'

/*
 * Checking values against the JSON Schemas MCP servers publish: a tool's `inputSchema`, before a
 * call is sent, and its `outputSchema`, for the SDK (docs/tools.md, "MCP servers"). A schema
 * that cannot be compiled is not checked at all rather than failing its server: the server
 * still checks what it receives, and the check here only answers the model sooner and better.
 */

const OPTIONS: Options = {
  strict: false,
  allErrors: true,
  // Formats would need ajv-formats; a server checks its own formats anyway.
  validateFormats: false,
  // A server's schema is taken as it is, not judged against its meta-schema.
  validateSchema: false,
  // Two tools may reuse one `$id` for different schemas: none is kept by id.
  addUsedSchema: false
}

let draft07: Ajv | undefined
let draft2020: Ajv2020 | undefined
const draft07Ajv = (): Ajv => (draft07 ??= new Ajv(OPTIONS))
const draft2020Ajv = (): Ajv2020 => (draft2020 ??= new Ajv2020(OPTIONS))

/**
 * `schema` compiled, or undefined when it cannot be. Draft 2020-12 and 2019-09 schemas (by their
 * `$schema`) compile as 2020-12, everything else as draft-07, which also reads most schemas
 * written without a `$schema` (ignoring the newer keywords it does not know).
 */
export const compileJsonSchema = (schema: object): ValidateFunction | undefined => {
  const dialect = '$schema' in schema && typeof schema.$schema === 'string' ? schema.$schema : ''
  const newer = /draft\/(2020-12|2019-09)/.test(dialect)
  const order = newer ? [draft2020Ajv, draft07Ajv] : [draft07Ajv, draft2020Ajv]
  for (const ajv of order) {
    try {
      return ajv().compile(schema)
    } catch {
      // The other dialect may read it.
    }
  }
  return undefined
}

const MAX_ERRORS_SHOWN = 5

const pointerSegment = (name: string): string => `/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`

const describeError = (error: ErrorObject): string => {
  const at = error.instancePath
  const params = error.params as Record<string, unknown>
  if (error.keyword === 'required' && typeof params['missingProperty'] === 'string') return `${at}${pointerSegment(params['missingProperty'])}: is required`
  if (error.keyword === 'additionalProperties' && typeof params['additionalProperty'] === 'string') {
    return `${at}${pointerSegment(params['additionalProperty'])}: is not allowed`
  }
  return `${at === '' ? '(root)' : at}: ${error.message ?? error.keyword}`
}

/**
 * Schema errors on one line, each as its JSON pointer and what is wrong
 * (`/count: must be integer; /text: is required`), at most five of them.
 */
export const describeSchemaErrors = (errors: ReadonlyArray<ErrorObject> | null | undefined): string => {
  const all = errors ?? []
  const shown = all.slice(0, MAX_ERRORS_SHOWN).map(describeError)
  if (all.length > MAX_ERRORS_SHOWN) shown.push(`and ${all.length - MAX_ERRORS_SHOWN} more`)
  return shown.length === 0 ? 'does not match the tool input schema' : shown.join('; ')
}

/**
 * The `decode` of an MCP tool: the raw arguments text as a JSON object, checked against the
 * tool's `inputSchema`. The schema is compiled on the first call only, once: a server may list
 * tools a run never calls.
 */
export const argumentsDecoder = (inputSchema: object): ((raw: string) => Either.Either<ToolArguments, string>) => {
  let validate: ValidateFunction | null | undefined
  return (raw) => {
    const decoded = decodeArgumentsObject(raw)
    if (Either.isLeft(decoded)) return decoded
    if (validate === undefined) validate = compileJsonSchema(inputSchema) ?? null
    if (validate === null || validate(decoded.right)) return decoded
    return Either.left(describeSchemaErrors(validate.errors))
  }
}

/**
 * The SDK client's checker of `structuredContent` against a tool's `outputSchema`. The SDK's
 * default compiles every output schema when tools are listed and throws on one it cannot
 * compile (a 2020-12 `$schema`), which would fail the whole listing; this one lets such a
 * result through unchecked.
 */
export const mcpOutputSchemaValidator: jsonSchemaValidator = {
  getValidator: <T>(schema: JsonSchemaType): JsonSchemaValidator<T> => {
    const validate = compileJsonSchema(schema as object)
    return (input) => {
      if (validate === undefined || validate(input)) return { valid: true, data: input as T, errorMessage: undefined }
      return { valid: false, data: undefined, errorMessage: describeSchemaErrors(validate.errors) }
    }
  }
}
