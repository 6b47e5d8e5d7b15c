import { Either } from 'effect'
import { describe, expect, it } from 'vitest'
import { compileJsonSchemaCheck, describeViolations, jsonSchemaDraft, jsonSchemaProblem, MAX_VIOLATIONS_SHOWN } from '../src/schema/json-schema-check.js'

const OBJECT = { type: 'object', properties: { 'a/b': { type: 'integer' }, nested: { type: 'object', additionalProperties: false } }, required: ['name'] }

describe('the JSON Schema checks of core', () => {
  it('points a missing or unexpected property at itself and the whole value at /, escaping the pointer', () => {
    const check = Either.getOrThrow(compileJsonSchemaCheck(OBJECT, { strictness: 'lenient' }))
    expect(describeViolations(check({ 'a/b': 'x', nested: { 'c~d': 1 } }))).toBe('/name: is required; /a~1b: must be integer; /nested/c~0d: is not allowed')
    expect(check([])).toEqual([{ pointer: '/', message: 'must be object' }])
  })

  it('lists at most MAX_VIOLATIONS_SHOWN problems, then how many more there are', () => {
    const check = Either.getOrThrow(compileJsonSchemaCheck({ type: 'array', items: { type: 'string' } }, { strictness: 'lenient' }))
    const text = describeViolations(check(Array.from({ length: MAX_VIOLATIONS_SHOWN + 3 }, (_, index) => index)))
    expect(text.split('; ')).toHaveLength(MAX_VIOLATIONS_SHOWN + 1)
    expect(text).toMatch(/^\/0: must be string; .*; \/19: must be string; and 3 more$/)
  })

  it('refuses an unknown keyword when strict and ignores it when lenient', () => {
    const typo = { type: 'object', requird: ['id'] }
    expect(compileJsonSchemaCheck(typo, { strictness: 'strict' })).toEqual(Either.left('strict mode: unknown keyword: "requird"'))
    expect(Either.isRight(compileJsonSchemaCheck(typo, { strictness: 'lenient' }))).toBe(true)
  })

  it('checks a schema against its meta-schema unless told to take it as it is', () => {
    const wrong = { type: 'object', properties: { id: { type: 'nope' } } }
    expect(compileJsonSchemaCheck(wrong, { strictness: 'lenient' })).toEqual(
      Either.left(
        'schema is invalid: data/properties/id/type must be equal to one of the allowed values, data/properties/id/type must be array, data/properties/id/type must match a schema in anyOf'
      )
    )
    expect(jsonSchemaProblem(wrong, { strictness: 'strict' })).toMatch(/^data\/properties\/id\/type must be equal to one of the allowed values/)
    expect(jsonSchemaProblem(OBJECT, { strictness: 'strict' })).toBeUndefined()
    // A schema Ajv can still compile (a title that is no string) is compiled as it is.
    const untidy = { type: 'object', title: 5 }
    expect(compileJsonSchemaCheck(untidy, { strictness: 'lenient' })).toEqual(Either.left('schema is invalid: data/title must be string'))
    expect(Either.isRight(compileJsonSchemaCheck(untidy, { strictness: 'lenient', metaSchema: false }))).toBe(true)
  })

  it('reads a schema as the draft its $schema names, or the one given for it, draft-07 otherwise', () => {
    expect(
      ['https://json-schema.org/draft/2020-12/schema', 'https://json-schema.org/draft/2019-09/schema', 'http://json-schema.org/draft-07/schema#', 7].map(
        jsonSchemaDraft
      )
    ).toEqual(['draft-2020-12', 'draft-2019-09', 'draft-07', 'draft-07'])
    const tuple = { type: 'array', prefixItems: [{ type: 'string' }], items: false }
    const as2020 = Either.getOrThrow(compileJsonSchemaCheck({ $schema: 'https://json-schema.org/draft/2020-12/schema', ...tuple }, { strictness: 'strict' }))
    expect(describeViolations(as2020([1]))).toBe('/0: must be string')
    const given = Either.getOrThrow(compileJsonSchemaCheck(tuple, { strictness: 'strict', $schema: 'https://json-schema.org/draft/2020-12/schema' }))
    expect(describeViolations(given(['a', 'b']))).toBe('/: must NOT have more than 1 items')
    // Draft-07 does not know prefixItems: strict refuses it rather than check something else.
    expect(compileJsonSchemaCheck(tuple, { strictness: 'strict' })).toEqual(Either.left('strict mode: unknown keyword: "prefixItems"'))
  })

  it('tries the other drafts when asked, for a schema the draft its $schema names cannot compile', () => {
    // Draft-07's tuple form of `items` under a 2020-12 `$schema`, as a server may publish it.
    const mislabelled = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'array', items: [{ type: 'string' }] }
    const options = { strictness: 'lenient', metaSchema: false } as const
    expect(compileJsonSchemaCheck(mislabelled, options)).toEqual(Either.left('items value must be ["object","boolean"]'))
    const check = Either.getOrThrow(compileJsonSchemaCheck(mislabelled, { ...options, otherDrafts: true }))
    expect(describeViolations(check([1]))).toBe('/0: must be string')
  })

  it('keeps no schema by its $id, so two schemas may share one', () => {
    const first = compileJsonSchemaCheck({ $id: 'https://example.test/result', type: 'object' }, { strictness: 'lenient' })
    const second = compileJsonSchemaCheck({ $id: 'https://example.test/result', type: 'object', required: ['a'] }, { strictness: 'lenient' })
    expect([Either.isRight(first), Either.isRight(second)]).toEqual([true, true])
  })
})
