import { Effect, Either, Exit, Fiber, JSONSchema, Schema } from 'effect'
import { describe, expect, it, vi } from 'vitest'
import * as z from 'zod'
import {
  catalogueToolOf,
  type DefinedTool,
  defineTool,
  isDefinedTool,
  makeToolCatalogue,
  MODULE_TOOL_MAX_OUTPUT_BYTES,
  RunToolContext,
  runToolCall,
  runToolCallNow,
  type StandardSchemaV1,
  ToolDefinitionError,
  type ToolOutcome,
  type ToolRunContext
} from '@agentvisor/core'

const WORKSPACE = '/srv/agentvisor/ws'
const ctxAt = (position = 0): RunToolContext => new RunToolContext('run-1', 3, position, 'call-7', { root: WORKSPACE }, {})

/** One call of `tool` through a catalogue, as a run makes it. */
const callOf = <A>(tool: DefinedTool<A>, args: unknown, ctx = ctxAt()): Promise<ToolOutcome> => {
  const catalogue = Either.getOrThrow(makeToolCatalogue([catalogueToolOf(tool)]))
  const raw = typeof args === 'string' ? args : JSON.stringify(args)
  return Effect.runPromise(runToolCall(catalogue, catalogue.get(tool.name), { name: tool.name, arguments: raw }, ctx))
}

/** The error `define` throws, which must be one `ToolDefinitionError` of one line. */
const definitionError = (define: () => unknown): string => {
  try {
    define()
  } catch (error) {
    expect(error).toBeInstanceOf(ToolDefinitionError)
    const message = (error as Error).message
    expect(message).not.toContain('\n')
    return message
  }
  throw new Error('defineTool did not throw')
}

const TICKET_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  type: 'object',
  properties: { id: { type: 'string', pattern: '^T-\\d+$' }, priority: { type: 'integer', minimum: 1 } },
  required: ['id'],
  additionalProperties: false
} as const

describe('defineTool with a JSON Schema input', () => {
  it('offers the schema itself without $schema, as a module tool judged as act tool on its name, of effect class effect by default', () => {
    const tool = defineTool({ name: 'lookup_ticket', description: 'Looks a ticket up', input: TICKET_SCHEMA, run: () => 'ok' })
    const entry = catalogueToolOf(tool)
    const { $schema: _, ...offered } = TICKET_SCHEMA
    expect(entry.spec).toEqual({ name: 'lookup_ticket', description: 'Looks a ticket up', parameters: offered })
    expect([entry.source, entry.effect, entry.runsAs]).toEqual(['module', 'effect', 'call'])
    expect(entry.policy({ id: 'T-1' })).toEqual({ act: 'tool', target: 'lookup_ticket' })
    expect(catalogueToolOf(tool)).toBe(entry)
  })

  it('answers every invalid argument as a JSON pointer and a message, and never calls run', async () => {
    const run = vi.fn(() => 'ran')
    const tool = defineTool({ name: 'lookup_ticket', description: 'Looks a ticket up', input: TICKET_SCHEMA, run })
    expect(await callOf(tool, { priority: 0, extra: true })).toEqual({
      ok: false,
      output: 'Invalid arguments for lookup_ticket: /id: is required; /extra: is not allowed; /priority: must be >= 1'
    })
    expect(await callOf(tool, { id: 'X-1' })).toEqual({ ok: false, output: 'Invalid arguments for lookup_ticket: /id: must match pattern "^T-\\d+$"' })
    expect(await callOf(tool, '["T-1"]')).toEqual({ ok: false, output: 'Invalid arguments for lookup_ticket: expected a JSON object, got an array' })
    expect(run).not.toHaveBeenCalled()
    expect(await callOf(tool, { id: 'T-1', priority: 2 })).toEqual({ ok: true, output: 'ran' })
    expect(run).toHaveBeenCalledWith({ id: 'T-1', priority: 2 }, expect.anything())
  })

  it('checks a draft 2020-12 schema as that draft', async () => {
    const tool = defineTool({
      name: 'pair',
      description: 'Takes a pair',
      input: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        properties: { pair: { type: 'array', prefixItems: [{ type: 'string' }] } }
      },
      run: () => 'ok'
    })
    expect(tool.parameters).not.toHaveProperty('$schema')
    expect(await callOf(tool, { pair: [1] })).toEqual({ ok: false, output: 'Invalid arguments for pair: /pair/0: must be string' })
  })
})

describe('defineTool with an Effect Schema input', () => {
  const Ticket = Schema.Struct({ id: Schema.String.pipe(Schema.pattern(/^T-\d+$/)), count: Schema.optional(Schema.NumberFromString) })

  it('offers JSONSchema.make of the schema without $schema, a top-level reference resolved, and hands run the decoded value', async () => {
    const run = vi.fn((args: { readonly id: string; readonly count?: number }) => `${args.id} x${args.count ?? 1}`)
    const tool = defineTool({ name: 'count', description: 'Counts', input: Ticket, run })
    const { $schema: _, ...offered } = JSONSchema.make(Ticket)
    expect(tool.parameters).toEqual(offered)
    expect(await callOf(tool, { id: 'T-4', count: '3' })).toEqual({ ok: true, output: 'T-4 x3' })
    expect(run.mock.calls[0]?.[0]).toEqual({ id: 'T-4', count: 3 })

    const named = defineTool({ name: 'named', description: 'Named', input: Ticket.annotations({ identifier: 'Ticket' }), run: () => '' })
    expect(named.parameters).toMatchObject({ type: 'object', required: ['id'] })
    expect(named.parameters).not.toHaveProperty('$ref')
  })

  it('answers invalid arguments with pointer and message for each problem, without calling run', async () => {
    const run = vi.fn(() => 'ran')
    const tool = defineTool({ name: 'count', description: 'Counts', input: Ticket, run })
    const outcome = await callOf(tool, { id: 7, count: 'many' })
    expect(outcome.ok).toBe(false)
    expect(outcome.output).toMatch(/^Invalid arguments for count: \/id: Expected string, actual 7; \/count: .*"many"/)
    expect(run).not.toHaveBeenCalled()
  })

  it('decodes an asynchronous Effect Schema inside the call', async () => {
    const Slow = Schema.Struct({ id: Schema.String.pipe(Schema.filterEffect((id) => Effect.as(Effect.sleep(1), id.startsWith('T-')))) })
    const run = vi.fn(() => 'ran')
    const tool = defineTool({ name: 'slow', description: 'Slow check', input: Slow, run })
    expect(await callOf(tool, { id: 'X-1' })).toMatchObject({ ok: false, output: expect.stringMatching(/^Invalid arguments for slow: \/id: /) })
    expect(run).not.toHaveBeenCalled()
    expect(await callOf(tool, { id: 'T-1' })).toEqual({ ok: true, output: 'ran' })
  })
})

describe('defineTool with a Standard Schema input', () => {
  const Label = z.object({ id: z.string().regex(/^T-\d+$/), label: z.string().min(1), times: z.number().int().default(1) })

  it('offers a zod schema through its Standard JSON Schema (~standard.jsonSchema), without $schema', async () => {
    const run = vi.fn((args: z.output<typeof Label>) => args.label.repeat(args.times))
    const tool = defineTool({ name: 'add_label', description: 'Adds a label', input: Label, run })
    const { $schema: _, ...offered } = z.toJSONSchema(Label, { target: 'draft-07', io: 'input' })
    expect(tool.parameters).toEqual(offered)
    expect(tool.parameters).toMatchObject({ type: 'object', required: ['id', 'label'] })
    expect(await callOf(tool, { id: 'T-1', label: 'ab' })).toEqual({ ok: true, output: 'ab' })
    // run gets zod's output: the default filled in.
    expect(run.mock.calls[0]?.[0]).toEqual({ id: 'T-1', label: 'ab', times: 1 })
  })

  it('answers invalid arguments with pointer and message for each zod issue, without calling run', async () => {
    const run = vi.fn(() => 'ran')
    const tool = defineTool({ name: 'add_label', description: 'Adds a label', input: Label, run })
    const outcome = await callOf(tool, { id: 'X', label: '', times: 1.5 })
    expect(outcome.ok).toBe(false)
    expect(outcome.output.split('; ').map((issue) => issue.replace(/^Invalid arguments for add_label: /, '').split(':')[0])).toEqual([
      '/id',
      '/label',
      '/times'
    ])
    expect(run).not.toHaveBeenCalled()
  })

  /** A Standard Schema of no known library, with an asynchronous check and no JSON Schema of its own. */
  const asyncIdSchema: StandardSchemaV1<unknown, { id: string }> = {
    '~standard': {
      version: 1,
      vendor: 'handmade',
      validate: async (value) => {
        const id = (value as { id?: unknown }).id
        return typeof id === 'string' ? { value: { id } } : { issues: [{ message: 'must be a string', path: [{ key: 'id' }] }] }
      }
    }
  }

  it('needs parameters for a Standard Schema without ~standard.jsonSchema, and offers them', () => {
    expect(definitionError(() => defineTool({ name: 'handmade', description: 'Handmade', input: asyncIdSchema, run: () => '' }))).toBe(
      'defineTool "handmade": input is a handmade Standard Schema without a JSON Schema (no ~standard.jsonSchema); give its JSON Schema as parameters'
    )
    const parameters = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }
    const tool = defineTool({ name: 'handmade', description: 'Handmade', input: asyncIdSchema, parameters, run: () => '' })
    expect(tool.parameters).toEqual(parameters)
  })

  it('validates a Standard Schema whose validate returns a promise inside the call', async () => {
    const run = vi.fn(({ id }: { id: string }) => `got ${id}`)
    const tool = defineTool({ name: 'handmade', description: 'Handmade', input: asyncIdSchema, parameters: { type: 'object' }, run })
    const catalogue = Either.getOrThrow(makeToolCatalogue([catalogueToolOf(tool)]))
    const now = runToolCallNow(catalogue, catalogue.get('handmade'), { name: 'handmade', arguments: '{"id":1}' }, ctxAt())
    expect(Effect.isEffect(now)).toBe(true)
    expect(await Effect.runPromise(now as Effect.Effect<ToolOutcome>)).toEqual({ ok: false, output: 'Invalid arguments for handmade: /id: must be a string' })
    expect(run).not.toHaveBeenCalled()
    expect(await callOf(tool, { id: 'T-9' })).toEqual({ ok: true, output: 'got T-9' })
  })
})

describe('what defineTool refuses', () => {
  const base = { description: 'A tool', run: () => '' }

  it('throws one line naming the tool and the problem for each definition error', () => {
    expect(definitionError(() => defineTool({ ...base, name: 'look up', input: { type: 'object' } }))).toBe(
      'defineTool "look up": name must be 1 to 64 letters, digits, "_" or "-"'
    )
    expect(definitionError(() => defineTool({ ...base, name: 'x'.repeat(65), input: { type: 'object' } }))).toMatch(/name must be 1 to 64/)
    expect(definitionError(() => defineTool({ ...base, name: 'typo', input: { type: 'object', properties: { id: { type: 'strin' } } } }))).toMatch(
      /^defineTool "typo": input is not a valid JSON Schema: schema is invalid: data\/properties\/id\/type must be equal to one of the allowed values/
    )
    expect(definitionError(() => defineTool({ ...base, name: 'unknown_keyword', input: { type: 'object', requird: ['id'] } }))).toBe(
      'defineTool "unknown_keyword": input is not a valid JSON Schema: strict mode: unknown keyword: "requird"'
    )
    expect(definitionError(() => defineTool({ ...base, name: 'text', input: { type: 'string' } }))).toBe(
      'defineTool "text": input must be an object schema (type "object"), got type "string"'
    )
    expect(definitionError(() => defineTool({ ...base, name: 'zod_text', input: z.string() }))).toBe(
      'defineTool "zod_text": input must be an object schema (type "object"), got type "string"'
    )
    expect(definitionError(() => defineTool({ ...base, name: 'dated', input: z.object({ at: z.date() }) }))).toBe(
      'defineTool "dated": input has no JSON Schema: Date cannot be represented in JSON Schema'
    )
    expect(definitionError(() => defineTool({ ...base, name: 'effect_dated', input: Schema.Struct({ at: Schema.DateFromSelf }) }))).toMatch(
      /^defineTool "effect_dated": input has no JSON Schema: Missing annotation at path: \["at"\]/
    )
    expect(definitionError(() => defineTool({ ...base, name: 'numbered', input: 42 as never }))).toBe(
      'defineTool "numbered": input must be a JSON Schema, an Effect Schema or a Standard Schema, got number'
    )
    expect(definitionError(() => defineTool({ ...base, name: 'slow', input: { type: 'object' }, timeoutMs: 0 }))).toBe(
      'defineTool "slow": timeoutMs must be a positive integer of at most 2147483647 ms, got 0'
    )
    expect(definitionError(() => defineTool({ ...base, name: 'risky', input: { type: 'object' }, effect: 'write' as never }))).toBe(
      'defineTool "risky": effect must be "read", "idempotent" or "effect", got "write"'
    )
    expect(definitionError(() => defineTool({ ...base, name: 'both', input: { type: 'object' }, parameters: { type: 'object' } }))).toMatch(
      /^defineTool "both": parameters is only for an Effect or Standard Schema input/
    )
  })
})

describe('what a call of a defined tool answers', () => {
  const tool = (run: (args: Readonly<Record<string, unknown>>, ctx: ToolRunContext) => unknown, timeoutMs?: number) =>
    defineTool({ name: 'probe', description: 'A probe', input: { type: 'object' }, run, ...(timeoutMs === undefined ? {} : { timeoutMs }) })

  it('answers a string as it is, any other JSON value as its JSON text, and undefined as an empty text', async () => {
    expect(
      await callOf(
        tool(() => 'plain text'),
        {}
      )
    ).toEqual({ ok: true, output: 'plain text' })
    expect(
      await callOf(
        tool(async () => ({ id: 'T-1', tags: ['a'] })),
        {}
      )
    ).toEqual({ ok: true, output: '{"id":"T-1","tags":["a"]}' })
    expect(
      await callOf(
        tool(() => 42),
        {}
      )
    ).toEqual({ ok: true, output: '42' })
    expect(
      await callOf(
        tool(() => null),
        {}
      )
    ).toEqual({ ok: true, output: 'null' })
    expect(
      await callOf(
        tool(() => undefined),
        {}
      )
    ).toEqual({ ok: true, output: '' })
    expect(
      await callOf(
        tool(() => 10n),
        {}
      )
    ).toEqual({ ok: false, output: 'Tool probe failed: its result is not JSON: Do not know how to serialize a BigInt' })
  })

  it('settles a tool that answers synchronously without an Effect', () => {
    const entry = catalogueToolOf(tool(() => 'now'))
    const catalogue = Either.getOrThrow(makeToolCatalogue([entry]))
    expect(runToolCallNow(catalogue, entry, { name: 'probe', arguments: '{}' }, ctxAt())).toEqual({ ok: true, output: 'now' })
  })

  it('answers a throw or a rejection as Tool <name> failed: <message>, without the stack', async () => {
    expect(
      await callOf(
        tool(() => {
          throw new Error('ticket service down')
        }),
        {}
      )
    ).toEqual({ ok: false, output: 'Tool probe failed: ticket service down' })
    expect(
      await callOf(
        tool(() => Promise.reject(new TypeError('bad id'))),
        {}
      )
    ).toEqual({ ok: false, output: 'Tool probe failed: bad id' })
    expect(
      await callOf(
        tool(() => Promise.reject('plain reason')),
        {}
      )
    ).toEqual({ ok: false, output: 'Tool probe failed: plain reason' })
  })

  it('cuts an answer longer than 100 KiB at a character boundary, saying so', async () => {
    const long = `${'a'.repeat(MODULE_TOOL_MAX_OUTPUT_BYTES - 1)}é and more`
    const outcome = await callOf(
      tool(() => long),
      {}
    )
    expect(outcome.ok).toBe(true)
    const total = Buffer.byteLength(long)
    expect(outcome.output).toBe(
      `${'a'.repeat(MODULE_TOOL_MAX_OUTPUT_BYTES - 1)}\n\n[probe: truncated, showing the first ${MODULE_TOOL_MAX_OUTPUT_BYTES - 1} of ${total} bytes]`
    )
  })

  it('aborts the signal and answers a timeout when a call runs past timeoutMs', async () => {
    let signal: AbortSignal | undefined
    const outcome = await callOf(
      tool((_, ctx) => {
        signal = ctx.signal
        return new Promise(() => {})
      }, 20),
      {}
    )
    expect(outcome).toEqual({ ok: false, output: 'Tool probe timed out after 20 ms' })
    expect(signal?.aborted).toBe(true)
    expect((signal!.reason as DOMException).name).toBe('TimeoutError')
  })

  it('aborts the signal when the call is interrupted, and answers nothing for it', async () => {
    let signal: AbortSignal | undefined
    let markStarted = (): void => {}
    const started = new Promise<void>((resolve) => {
      markStarted = resolve
    })
    const probe = tool((_, ctx) => {
      signal = ctx.signal
      markStarted()
      return new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('too late')))
    })
    const catalogue = Either.getOrThrow(makeToolCatalogue([catalogueToolOf(probe)]))
    const fiber = Effect.runFork(runToolCall(catalogue, catalogue.get('probe'), { name: 'probe', arguments: '{}' }, ctxAt()))
    await started
    expect(signal?.aborted).toBe(false)
    const exit = await Effect.runPromise(Fiber.interrupt(fiber))
    expect(Exit.isInterrupted(exit)).toBe(true)
    expect(signal?.aborted).toBe(true)
    expect((signal!.reason as DOMException).name).toBe('AbortError')
  })

  it("hands run the call's run, step, call id, idempotency key and the workspace's absolute path", async () => {
    let seen: Omit<ToolRunContext, 'signal'> | undefined
    await callOf(
      tool((_, { signal: _signal, ...ctx }) => {
        seen = ctx
      }),
      {},
      ctxAt(2)
    )
    expect(seen).toEqual({ runId: 'run-1', step: 3, callId: 'call-7', idempotencyKey: 'run-1:3:2', workspace: WORKSPACE })
  })

  it('keeps the idempotency key of a call the same when the call runs again, as on resume', async () => {
    const keys: string[] = []
    const keyed = defineTool({
      name: 'close_ticket',
      description: 'Closes',
      input: { type: 'object' },
      effect: 'idempotent',
      run: (_, { idempotencyKey }) => {
        keys.push(idempotencyKey)
      }
    })
    expect(catalogueToolOf(keyed).effect).toBe('idempotent')
    await callOf(keyed, {}, ctxAt(1))
    await callOf(keyed, {}, ctxAt(1))
    await callOf(keyed, {}, ctxAt(2))
    expect(keys).toEqual(['run-1:3:1', 'run-1:3:1', 'run-1:3:2'])
  })
})

describe('the defineTool mark', () => {
  it('is recognised on a tool made by a second copy of the package, which this copy runs', async () => {
    vi.resetModules()
    const copy = await import('@agentvisor/core')
    expect(copy.defineTool).not.toBe(defineTool)
    expect(copy.ToolDefinitionError).not.toBe(ToolDefinitionError)
    const theirs = copy.defineTool({
      name: 'theirs',
      description: 'From the other copy',
      input: { type: 'object', required: ['id'] },
      run: ({ id }) => `id ${id}`
    })
    expect(isDefinedTool(theirs)).toBe(true)
    expect(await callOf(theirs, { id: 'T-2' })).toEqual({ ok: true, output: 'id T-2' })
    expect(await callOf(theirs, {})).toEqual({ ok: false, output: 'Invalid arguments for theirs: /id: is required' })
    expect(isDefinedTool({ name: 'lookalike', run: () => '' })).toBe(false)
    expect(() => catalogueToolOf({ name: 'lookalike' } as never)).toThrow('defineTool "lookalike": is not a defineTool value of this agentvisor version')
  })
})
