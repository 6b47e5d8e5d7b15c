import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv'
import { Ajv2019 } from 'ajv/dist/2019.js'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { Either } from 'effect'

/*
 * Every JSON Schema of core is checked here, with Ajv: an agent's `output` (docs/agents.md,
 * "Structured results"), a `defineTool` input (docs/tools.md, "Tools of your own") and the schemas
 * MCP servers publish (docs/tools.md, "MCP servers"). Each caller chooses how strict to be; the
 * drafts, the compiling and the text of a violation are the same for all three, so that the model
 * reads one form whichever kind of tool it called.
 */

/** One reason a value does not fit its schema: where (a JSON pointer, `/` for the whole value) and what. */
export interface SchemaViolation {
  readonly pointer: string
  readonly message: string
}

/** A compiled schema: the violations of a value, none when it fits. */
export type JsonSchemaCheck = (value: unknown) => ReadonlyArray<SchemaViolation>

/**
 * How a schema is read. `strict`: a keyword Ajv does not know (a typo such as `requird`) is a
 * definition error rather than a constraint silently not checked, for a schema its author can fix.
 * `lenient`: such keywords are ignored, for a schema written for a model (with `title`s,
 * `examples` and vendor keys) or published by a server nobody here can fix.
 */
export type JsonSchemaStrictness = 'strict' | 'lenient'

/** The drafts Ajv checks; a schema is read as the one its `$schema` names, draft-07 when it names none of them. */
export type JsonSchemaDraft = 'draft-07' | 'draft-2019-09' | 'draft-2020-12'

const DRAFTS: ReadonlyArray<JsonSchemaDraft> = ['draft-07', 'draft-2020-12', 'draft-2019-09']

/** The draft `$schema` names: 2020-12 or 2019-09 when it says so, else draft-07, which also reads most schemas without `$schema`. */
export const jsonSchemaDraft = ($schema: unknown): JsonSchemaDraft =>
  typeof $schema !== 'string' ? 'draft-07' : $schema.includes('2020-12') ? 'draft-2020-12' : $schema.includes('2019-09') ? 'draft-2019-09' : 'draft-07'

type AnyAjv = Ajv | Ajv2019 | Ajv2020

/*
 * Every error at once (the model fixes them all in one go). Formats are offered to the model but
 * not checked: they would need ajv-formats, and a server checks its own. No schema is kept by its
 * `$id`: two tools, two agents or two servers may reuse one `$id` for different schemas. The
 * meta-schema check is made by `compileJsonSchemaCheck` itself, so that each caller can skip it.
 * Strict mode's checks that only log are off, and nothing is logged.
 */
const COMMON: Options = { allErrors: true, validateFormats: false, validateSchema: false, addUsedSchema: false, logger: false }
const OPTIONS: Readonly<Record<JsonSchemaStrictness, Options>> = {
  strict: { ...COMMON, strict: true, strictTypes: false, strictTuples: false, strictRequired: false },
  lenient: { ...COMMON, strict: false }
}

// One instance per draft and strictness, made on first use: most processes need one or two.
const instances = new Map<string, AnyAjv>()

const ajvFor = (draft: JsonSchemaDraft, strictness: JsonSchemaStrictness): AnyAjv => {
  const key = `${draft} ${strictness}`
  let ajv = instances.get(key)
  if (ajv === undefined) {
    const options = OPTIONS[strictness]
    ajv = draft === 'draft-2020-12' ? new Ajv2020(options) : draft === 'draft-2019-09' ? new Ajv2019(options) : new Ajv(options)
    instances.set(key, ajv)
  }
  return ajv
}

/** How `compileJsonSchemaCheck` reads a schema. */
export interface JsonSchemaCheckOptions {
  readonly strictness: JsonSchemaStrictness
  /** The `$schema` that picks the draft, for a schema it was taken out of; the schema's own by default. */
  readonly $schema?: unknown
  /** Whether the schema is first checked against its draft's meta-schema (the default); false takes it as it is. */
  readonly metaSchema?: boolean | undefined
  /** Whether a schema its draft cannot compile is tried as the other drafts before it is refused. */
  readonly otherDrafts?: boolean | undefined
}

/** An Ajv message on one line: the reason is shown after a field's name. */
const oneLine = (error: unknown): string => (error instanceof Error ? error.message : String(error)).replace(/\s*\n\s*/g, ' ').trim()

const compiledBy = (ajv: AnyAjv, schema: object, metaSchema: boolean): ValidateFunction => {
  // Ajv's own wording for a schema its meta-schema refuses, as its `validateSchema` option would throw it.
  if (metaSchema) ajv.validateSchema(schema, true)
  return ajv.compile(schema)
}

/**
 * The check of `schema`, or why it is no usable schema (Ajv's message on one line, such as
 * `strict mode: unknown keyword: "requird"`), for the caller to put after what the schema is.
 */
export const compileJsonSchemaCheck = (schema: object, options: JsonSchemaCheckOptions): Either.Either<JsonSchemaCheck, string> => {
  const declared = jsonSchemaDraft('$schema' in options ? options.$schema : (schema as { $schema?: unknown }).$schema)
  const drafts = options.otherDrafts === true ? [declared, ...DRAFTS.filter((draft) => draft !== declared)] : [declared]
  let first: unknown
  for (const draft of drafts) {
    try {
      const validate = compiledBy(ajvFor(draft, options.strictness), schema, options.metaSchema !== false)
      return Either.right((value) => (validate(value) ? [] : ajvViolations(validate.errors)))
    } catch (error) {
      first ??= error
    }
  }
  return Either.left(oneLine(first))
}

/**
 * Why `schema` does not fit its draft's meta-schema (Ajv's `errorsText`, such as
 * `data/properties/id/type must be equal to one of the allowed values`), or undefined when it fits.
 */
export const jsonSchemaProblem = (schema: object, options: Pick<JsonSchemaCheckOptions, 'strictness' | '$schema'>): string | undefined => {
  const ajv = ajvFor(jsonSchemaDraft('$schema' in options ? options.$schema : (schema as { $schema?: unknown }).$schema), options.strictness)
  try {
    return ajv.validateSchema(schema) === true ? undefined : ajv.errorsText(ajv.errors)
  } catch (error) {
    return oneLine(error)
  }
}

/** A JSON pointer of `path` (RFC 6901: `~` and `/` escaped); the whole value is `/`, which reads better than nothing. */
export const jsonPointer = (path: ReadonlyArray<PropertyKey>): string =>
  path.length === 0 ? '/' : path.map((segment) => `/${String(segment).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('')

/** The property a `required` or `additionalProperties` error is about: the pointer then names it rather than its object. */
const propertyOf = (error: ErrorObject): { readonly name: string; readonly message: string } | undefined => {
  const params = error.params as Record<string, unknown>
  if (error.keyword === 'required' && typeof params['missingProperty'] === 'string') return { name: params['missingProperty'], message: 'is required' }
  if (error.keyword === 'additionalProperties' && typeof params['additionalProperty'] === 'string') {
    return { name: params['additionalProperty'], message: 'is not allowed' }
  }
  return undefined
}

/** Ajv's errors as violations: `/id: is required`, `/extra: is not allowed`, `/priority: must be >= 1`, `/: must be object`. */
const ajvViolations = (errors: ReadonlyArray<ErrorObject> | null | undefined): ReadonlyArray<SchemaViolation> =>
  (errors ?? []).map((error) => {
    const property = propertyOf(error)
    // Ajv's `instancePath` is already an escaped pointer, empty for the whole value.
    if (property !== undefined) return { pointer: `${error.instancePath}${jsonPointer([property.name])}`, message: property.message }
    return { pointer: error.instancePath === '' ? '/' : error.instancePath, message: error.message ?? error.keyword }
  })

/** How many problems the model is told at once: a schema can find thousands in one array. */
export const MAX_VIOLATIONS_SHOWN = 20

/** One violation as the model reads it: `/facts: must be array`. */
export const violationText = (violation: SchemaViolation): string => `${violation.pointer}: ${violation.message}`

/**
 * Problems on one line, `; ` between them: at most `MAX_VIOLATIONS_SHOWN`, then `and N more`. Each
 * is a violation's text, or a schema library's own in the same form (`/path: message`).
 */
export const joinViolationTexts = (texts: ReadonlyArray<string>): string => {
  if (texts.length === 0) return 'rejected by the schema'
  const shown = texts.slice(0, MAX_VIOLATIONS_SHOWN)
  if (texts.length > MAX_VIOLATIONS_SHOWN) shown.push(`and ${texts.length - MAX_VIOLATIONS_SHOWN} more`)
  return shown.join('; ')
}

/** Violations on one line for the model: `/facts/0: must be string; /summary: is required`. */
export const describeViolations = (violations: ReadonlyArray<SchemaViolation>): string => joinViolationTexts(violations.map(violationText))
