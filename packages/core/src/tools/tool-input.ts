import { Effect, Either, JSONSchema, ParseResult, Schema } from 'effect'
import { isPlainObject } from '../contract/nesting.js'
import { compileJsonSchemaCheck, jsonPointer, jsonSchemaProblem, violationText } from '../schema/json-schema-check.js'
import { toolSchemaOutOfBounds } from '../schema/schema-bounds.js'

/*
 * The three kinds of input a `defineTool` accepts (docs/tools.md, "Tools of your own"): a JSON
 * Schema, an Effect Schema or a Standard Schema (zod 4, valibot, ...). Each becomes the same two
 * things: the JSON Schema the model is offered, and a validator of the arguments it sends.
 * Nothing here depends on zod: a Standard Schema is read through its `~standard` interface only.
 */

/** A JSON Schema, as a plain object. */
export type JsonSchemaInput = Readonly<Record<string, unknown>>

/** One issue of a Standard Schema's validation (the Standard Schema v1 interface, standardschema.dev). */
export interface StandardSchemaIssue {
  readonly message: string
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined
}

/** What a Standard Schema's `validate` answers. */
export type StandardSchemaResult<Output> = { readonly value: Output; readonly issues?: undefined } | { readonly issues: ReadonlyArray<StandardSchemaIssue> }

/**
 * A Standard Schema v1 (zod 4, valibot, ArkType, ...), declared here by its shape so that core
 * depends on none of them. `jsonSchema` is the Standard JSON Schema interface, which zod 4
 * implements on every schema; a library without it needs `parameters` next to `input`.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1
    readonly vendor: string
    readonly validate: (value: unknown) => StandardSchemaResult<Output> | Promise<StandardSchemaResult<Output>>
    readonly types?: { readonly input: Input; readonly output: Output } | undefined
    readonly jsonSchema?: { readonly input: (options: { readonly target: string }) => Record<string, unknown> } | undefined
  }
}

/**
 * The arguments as the tool's typed input, or every problem found, each as a JSON pointer into
 * the arguments and a message (`/path: must be string`).
 */
export type CheckedArguments<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly issues: ReadonlyArray<string> }

/** A tool's input made usable: what the model is offered, and how its arguments are checked. */
export interface ToolInput<A> {
  /** An object schema (`type: "object"`), without `$schema`. */
  readonly parameters: Readonly<Record<string, unknown>>
  /** Synchronous when the schema can answer at once; a promise for an asynchronous Standard or Effect Schema. */
  readonly validate: (value: unknown) => CheckedArguments<A> | Promise<CheckedArguments<A>>
}

/** What `toolInput` needs besides the input: an explicit offered schema, for a Standard Schema without one. */
export interface ToolInputOptions {
  readonly parameters?: JsonSchemaInput | undefined
}

/** The message of anything thrown, on one line. */
export const oneLine = (error: unknown): string =>
  (error instanceof Error ? error.message : typeof error === 'string' ? error : String(error)).replace(/\s*\n\s*/g, ' ').trim()

/** A problem an Effect or Standard Schema found, in the form of Ajv's: a JSON pointer into the arguments (`/` for the object itself) and the message. */
const issueText = (path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }>, message: string): string =>
  violationText({ pointer: jsonPointer(path.map((segment) => (typeof segment === 'object' ? segment.key : segment))), message })

/** A promise, or any thenable (one from another realm or library included). */
export const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === 'object' || typeof value === 'function') && value !== null && 'then' in value && typeof value.then === 'function'

const isStandardSchema = (value: unknown): value is StandardSchemaV1 => {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null || !('~standard' in value)) return false
  const props = value['~standard']
  return typeof props === 'object' && props !== null && 'validate' in props && typeof props.validate === 'function'
}

// --- The offered schema -------------------------------------------------------------------------

/**
 * The schema the model is offered: a JSON copy (what a provider sends anyway; it also detaches it
 * from the caller's object), without `$schema`, which some providers refuse, and with a top-level
 * `$ref` into its own `$defs` (Effect's form for a schema with an identifier) replaced by what it
 * names. Must be an object schema: providers call a tool with a JSON object of arguments.
 */
const offeredSchema = (schema: unknown, from: string): Either.Either<Record<string, unknown>, string> => {
  // Before the copy, which is recursive: a schema nested thousands of levels would overflow it (docs/tools.md, "Bounds on a tool's schema").
  const outOfBounds = toolSchemaOutOfBounds(schema)
  if (outOfBounds !== undefined) return Either.left(`${from} ${outOfBounds}`)
  let copy: unknown
  try {
    copy = JSON.parse(JSON.stringify(schema))
  } catch (error) {
    return Either.left(`${from} is not JSON: ${oneLine(error)}`)
  }
  if (!isPlainObject(copy)) return Either.left(`${from} must be a JSON Schema object`)
  const { $schema: _dropped, ...rest } = copy
  const resolved = inlineTopLevelRef(rest)
  if (resolved['type'] !== 'object') {
    return Either.left(
      `${from} must be an object schema (type "object"), got ${resolved['type'] === undefined ? 'no type' : `type ${JSON.stringify(resolved['type'])}`}`
    )
  }
  return Either.right(resolved)
}

const inlineTopLevelRef = (schema: Record<string, unknown>): Record<string, unknown> => {
  const ref = schema['$ref']
  const defs = schema['$defs']
  if (typeof ref !== 'string' || !ref.startsWith('#/$defs/') || !isPlainObject(defs)) return schema
  const target = defs[ref.slice('#/$defs/'.length)]
  if (!isPlainObject(target)) return schema
  // `$defs` stays: the definition may refer to itself or to its siblings.
  const { $ref: _ref, ...rest } = schema
  return { ...rest, ...target, $defs: defs }
}

// --- JSON Schema, checked by Ajv ----------------------------------------------------------------

/*
 * Strict (docs/tools.md, "Tools of your own"): an unknown keyword (a typo such as `requird`) is a
 * definition error rather than a constraint silently not checked. The draft is the one the input's
 * `$schema` names, which the offered schema no longer has.
 */
const jsonSchemaInput = <A>(schema: Record<string, unknown>): Either.Either<ToolInput<A>, string> =>
  Either.flatMap(offeredSchema(schema, 'input'), (parameters) =>
    compileJsonSchemaCheck(parameters, { strictness: 'strict', $schema: schema['$schema'] }).pipe(
      Either.mapLeft((reason) => `input is not a valid JSON Schema: ${reason}`),
      Either.map(
        (check): ToolInput<A> => ({
          parameters,
          validate: (value) => {
            const violations = check(value)
            return violations.length === 0 ? { ok: true, value: value as A } : { ok: false, issues: violations.map(violationText) }
          }
        })
      )
    )
  )

/** Whether `parameters` is a valid JSON Schema (for one given next to a Standard Schema). */
const checkedParameters = (parameters: JsonSchemaInput): Either.Either<Record<string, unknown>, string> =>
  Either.flatMap(offeredSchema(parameters, 'parameters'), (offered) => {
    const problem = jsonSchemaProblem(offered, { strictness: 'strict', $schema: parameters['$schema'] })
    return problem === undefined ? Either.right(offered) : Either.left(`parameters is not a valid JSON Schema: ${problem}`)
  })

// --- Effect Schema ------------------------------------------------------------------------------

const effectIssues = (error: ParseResult.ParseError): ReadonlyArray<string> =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => issueText(issue.path, issue.message))

const effectSchemaInput = <A>(schema: Schema.Schema<A, unknown, never>, options: ToolInputOptions): Either.Either<ToolInput<A>, string> => {
  let offered: Either.Either<Record<string, unknown>, string>
  if (options.parameters !== undefined) offered = checkedParameters(options.parameters)
  else {
    try {
      offered = offeredSchema(JSONSchema.make(schema), 'input')
    } catch (error) {
      return Either.left(`input has no JSON Schema: ${oneLine(error)}`)
    }
  }
  // Extra fields are left out rather than refused, as the model may add some the schema ignores.
  const decodeNow = Schema.decodeUnknownEither(schema, { errors: 'all', onExcessProperty: 'ignore' })
  const decodeLater = Schema.decodeUnknown(schema, { errors: 'all', onExcessProperty: 'ignore' })
  const validated = (result: Either.Either<A, ParseResult.ParseError>): CheckedArguments<A> =>
    Either.isRight(result) ? { ok: true, value: result.right } : { ok: false, issues: effectIssues(result.left) }
  return Either.map(offered, (parameters) => ({
    parameters,
    validate: (value) => {
      const now = decodeNow(value)
      if (Either.isRight(now)) return { ok: true, value: now.right }
      const issues = ParseResult.ArrayFormatter.formatErrorSync(now.left)
      // A schema with an asynchronous part cannot answer synchronously: it is decoded again as an Effect.
      if (issues.some((issue) => issue._tag === 'Forbidden')) return Effect.runPromise(Effect.either(decodeLater(value))).then(validated)
      return { ok: false, issues: issues.map((issue) => issueText(issue.path, issue.message)) }
    }
  }))
}

// --- Standard Schema ----------------------------------------------------------------------------

const standardValidated = <A>(result: StandardSchemaResult<A>): CheckedArguments<A> =>
  result.issues === undefined
    ? { ok: true, value: result.value }
    : { ok: false, issues: result.issues.map((issue) => issueText(issue.path ?? [], issue.message)) }

/** The Standard JSON Schema of the input: draft-07, which every provider reads, else draft 2020-12. */
const standardJsonSchema = (schema: StandardSchemaV1): Either.Either<unknown, string> => {
  const convert = schema['~standard'].jsonSchema?.input
  if (typeof convert !== 'function') {
    return Either.left(
      `input is a ${schema['~standard'].vendor} Standard Schema without a JSON Schema (no ~standard.jsonSchema); give its JSON Schema as parameters`
    )
  }
  try {
    return Either.right(convert({ target: 'draft-07' }))
  } catch (first) {
    try {
      return Either.right(convert({ target: 'draft-2020-12' }))
    } catch {
      return Either.left(`input has no JSON Schema: ${oneLine(first)}`)
    }
  }
}

const standardSchemaInput = <A>(schema: StandardSchemaV1<unknown, A>, options: ToolInputOptions): Either.Either<ToolInput<A>, string> => {
  const offered =
    options.parameters !== undefined
      ? checkedParameters(options.parameters)
      : Either.flatMap(standardJsonSchema(schema), (json) => offeredSchema(json, 'input'))
  const standard = schema['~standard']
  return Either.map(offered, (parameters) => ({
    parameters,
    validate: (value) => {
      const result = standard.validate(value)
      return isPromiseLike(result) ? Promise.resolve(result).then(standardValidated) : standardValidated(result)
    }
  }))
}

// --- Which kind --------------------------------------------------------------------------------

/**
 * `input` made usable, or (a string) what is wrong with it. An Effect Schema is recognised first
 * (it is also an object), then a Standard Schema by its `~standard.validate`, then a plain object
 * as a JSON Schema. `parameters` overrides the offered schema of an Effect or Standard Schema; a
 * JSON Schema is offered as itself, so `parameters` next to it is refused as ambiguous.
 */
export const toolInput = <A>(input: unknown, options: ToolInputOptions = {}): Either.Either<ToolInput<A>, string> => {
  if (Schema.isSchema(input)) return effectSchemaInput(input as Schema.Schema<A, unknown, never>, options)
  if (isStandardSchema(input)) return standardSchemaInput(input as StandardSchemaV1<unknown, A>, options)
  if (isPlainObject(input)) {
    if (options.parameters !== undefined)
      return Either.left('parameters is only for an Effect or Standard Schema input; a JSON Schema input is offered as itself')
    return jsonSchemaInput(input)
  }
  const kind = input === null ? 'null' : Array.isArray(input) ? 'an array' : typeof input
  return Either.left(`input must be a JSON Schema, an Effect Schema or a Standard Schema, got ${kind}`)
}
