import { fileURLToPath } from 'node:url'
import { Effect, Either } from 'effect'
import { afterAll, describe, expect, it } from 'vitest'
import * as z from 'zod'
import {
  compilePolicy,
  defineTool,
  describeDecision,
  makeMcpPool,
  makeToolCatalogue,
  parseTaskContract,
  quoteName,
  TOOL_SCHEMA_BOUNDS,
  ToolDefinitionError
} from '@agentvisor/core'

// What a server or a tool module may not hand agentvisor (docs/tools.md, "Bounds on a tool's
// schema" and "Tool names and what the model sees"): refused when the server starts or the tool
// is defined, with one line naming the server and the tool, never a stack overflow or a dump.
const HOSTILE = fileURLToPath(new URL('./fixtures/mcp/hostile-server.mjs', import.meta.url))
const pool = makeMcpPool({ killGraceMs: 300 })
afterAll(() => pool.close())

const started = (hostile: string) =>
  Effect.runPromise(Effect.either(pool.start('evil', { command: process.execPath, args: [HOSTILE], env: { MCP_HOSTILE: hostile } })))

const DEEP_AT = `/properties/next/properties/next/properties/next/properties/next/properties/next/properties/next/properties/next/prop...`

describe('an MCP server listing a hostile tool', () => {
  it.each([
    ['deep', 'tool-schema', `MCP server "evil": its tool "deep" cannot be offered: its inputSchema nests deeper than 64 levels (at ${DEEP_AT})`],
    ['deep-output', 'tool-schema', `MCP server "evil": its tool "deep_out" cannot be offered: its outputSchema nests deeper than 64 levels (at ${DEEP_AT})`],
    [
      'huge-enum',
      'tool-schema',
      'MCP server "evil": its tool "pick" cannot be offered: its inputSchema has a list of 200000 items at /properties/v/enum, more than 1000'
    ],
    ['large', 'tool-schema', 'MCP server "evil": its tool "large" cannot be offered: its inputSchema is larger than 64 KiB as JSON'],
    ['not-object', 'tool-schema', 'MCP server "evil": its tool "scalar" cannot be offered: inputSchema.type: Invalid input: expected "object"'],
    ['no-schema', 'tool-schema', 'MCP server "evil": its tool "bare" cannot be offered: inputSchema: Invalid input: expected object, received undefined'],
    ['not-string-name', 'tool-schema', 'MCP server "evil": its tool number 2 cannot be offered: name: Invalid input: expected string, received number'],
    ['empty-name', 'tool-name', 'MCP server "evil": it lists a tool with an empty name, which MCP does not allow'],
    [
      'invisible-name',
      'tool-name',
      'MCP server "evil": its tool "ex\\u{200B}ec" cannot be offered: its name "evil__ex\\u{200B}ec" has characters a tool name may not have (only letters, digits, _ and -)'
    ]
  ])('refuses it at start (%s), in one line naming the server, the tool and what is wrong', async (hostile, reason, message) => {
    const result = await started(hostile)
    expect(Either.isLeft(result) && { reason: result.left.reason, message: result.left.message }).toEqual({ reason, message })
  })

  it('starts a server whose tools are all inside the bounds', async () => {
    const result = await started('none')
    expect(Either.getOrThrow(result).tools.map((tool) => tool.name)).toEqual(['evil__fine'])
  })
})

describe('a defined tool with a hostile schema', () => {
  const refusal = (input: unknown): string => {
    try {
      defineTool({ name: 'hostile', description: 'Hostile', input: input as never, run: () => '' })
    } catch (error) {
      expect(error).toBeInstanceOf(ToolDefinitionError)
      return (error as ToolDefinitionError).message
    }
    throw new Error('defineTool did not throw')
  }
  let deep: Record<string, unknown> = { type: 'string' }
  for (let i = 0; i < 5_000; i++) deep = { type: 'object', properties: { next: deep } }

  it('is refused with one line naming the tool and the bound: depth, list length, size, a cycle', () => {
    expect(refusal(deep)).toBe(`defineTool "hostile": input nests deeper than ${TOOL_SCHEMA_BOUNDS.maxDepth} levels (at ${DEEP_AT})`)
    const values = Array.from({ length: 200_000 }, (_, i) => `v${i}`)
    expect(refusal({ type: 'object', properties: { v: { enum: values } } })).toBe(
      'defineTool "hostile": input has a list of 200000 items at /properties/v/enum, more than 1000'
    )
    expect(refusal({ type: 'object', description: 'x'.repeat(70_000) })).toBe('defineTool "hostile": input is larger than 64 KiB as JSON')
    const cyclic: Record<string, unknown> = { type: 'object' }
    cyclic['properties'] = { self: cyclic }
    expect(refusal(cyclic)).toMatch(/^defineTool "hostile": input nests deeper than 64 levels \(at \/properties\/self\/properties\/self/)
    // A zod schema's JSON Schema is bounded the same way.
    expect(refusal(z.object({ v: z.enum(values.slice(0, 1_001) as [string, ...string[]]) }))).toBe(
      'defineTool "hostile": input has a list of 1001 items at /properties/v/enum, more than 1000'
    )
  })

  it('names an invisible name with its invisible characters written out', () => {
    expect(() => defineTool({ name: 'ex\u200bec', description: 'x', input: { type: 'object' }, run: () => '' })).toThrow(
      'defineTool "ex\\u{200B}ec": name must be 1 to 64 letters, digits, "_" or "-"'
    )
  })
})

describe('quoteName', () => {
  it('writes control, format and other invisible characters as \\u{...}, and escapes quotes', () => {
    expect(quoteName('exec')).toBe('"exec"')
    expect(quoteName('ex\u200bec')).toBe('"ex\\u{200B}ec"')
    expect(quoteName('\u202ecexe')).toBe('"\\u{202E}cexe"')
    expect(quoteName('a\nb\u0007')).toBe('"a\\u{A}b\\u{7}"')
    expect(quoteName('no\u00a0break\u3164')).toBe('"no\\u{A0}break\\u{3164}"')
    expect(quoteName('say "hi" \\')).toBe('"say \\"hi\\" \\\\"')
    expect(quoteName('café 日本 👍')).toBe('"café 日本 👍"')
  })

  it('is how the catalogue, the task file, agents and the policy quote the names they were given', () => {
    const catalogue = Either.getOrThrow(makeToolCatalogue([]))
    expect(catalogue.unknownAnswer('ex\u200bec').output).toMatch(/^Unknown tool "ex\\u\{200B\}ec"\./)
    const task = { goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }] }
    const refused = (input: unknown) => Either.match(parseTaskContract(input, '/base'), { onLeft: (error) => error.message, onRight: () => 'accepted' })
    expect(refused({ ...task, agents: { 'ex\u202ecexe': {} } })).toBe('agents."ex\\u{202E}cexe": is not a known field')
    const policy = Either.getOrThrow(compilePolicy([{ name: 'te\u200bam', deny: { tool: ['docs__*'] } }]))
    expect(describeDecision(policy.check('tool', 'docs__send'))).toBe('tool docs__send refused by rule "docs__*" in layer "te\\u{200B}am"')
  })
})
