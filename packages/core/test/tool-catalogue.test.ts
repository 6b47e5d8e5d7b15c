import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect, Either } from 'effect'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  builtinCatalogue,
  type CallableTool,
  decodeArgumentsObject,
  makeToolCatalogue,
  openWorkspace,
  RunToolContext,
  runToolCall,
  SPAWN_CHILD_TOOL,
  type ToolArguments,
  type ToolCatalogue,
  type ToolContext,
  toolActOf,
  TOO_DEEP_ARGUMENTS,
  WORKSPACE_TOOLS,
  type Workspace
} from '@agentvisor/core'

let base: string
let ws: Workspace

beforeEach(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-catalogue-')))
  ws = await Effect.runPromise(openWorkspace(path.join(base, 'ws')))
})

afterEach(() => rmSync(base, { recursive: true, force: true }))

/** What the built-in tools offered the model before they became catalogue entries, byte for byte. */
const SPECS_BEFORE = JSON.parse(readFileSync(new URL('./fixtures/builtin-tool-specs.json', import.meta.url), 'utf8')) as unknown[]

const ctxAt = (position: number, step = 1): RunToolContext => new RunToolContext('run-1', step, position, `call-${position}`, ws, {})

const callIn = (catalogue: ToolCatalogue, name: string, args: unknown, ctx: ToolContext = ctxAt(0)) =>
  Effect.runPromise(runToolCall(catalogue, catalogue.get(name), { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) }, ctx))

/** A tool of the test's own, the shape `defineTool` will produce. */
const testTool = (name: string, run: CallableTool<ToolArguments>['run']): CallableTool<ToolArguments> => ({
  name,
  source: 'module',
  spec: { name, description: `the test's ${name}`, parameters: { type: 'object', properties: {} } },
  effect: 'effect',
  runsAs: 'call',
  decode: decodeArgumentsObject,
  policy: () => undefined,
  run
})

describe('the built-in tool catalogue', () => {
  it('offers the model exactly the specs it offered before, in the same order, spawn_child only to a run that may have children', () => {
    expect(JSON.parse(JSON.stringify(builtinCatalogue.offered(true)))).toEqual(SPECS_BEFORE)
    expect(JSON.parse(JSON.stringify(builtinCatalogue.offered(false)))).toEqual(SPECS_BEFORE.slice(0, 4))
    // The exports code already used are the catalogue's own objects.
    expect(WORKSPACE_TOOLS).toBe(builtinCatalogue.offered(false))
    expect(builtinCatalogue.offered(true).at(-1)).toBe(SPAWN_CHILD_TOOL)
    expect(builtinCatalogue.tools.map((tool) => tool.spec)).toEqual(builtinCatalogue.offered(true))
  })

  it('gives each built-in the effect class the journal has always treated it by', () => {
    expect(builtinCatalogue.tools.map((tool) => [tool.name, tool.effect, tool.runsAs, tool.source])).toEqual([
      ['read_file', 'read', 'call', 'builtin'],
      ['write_file', 'idempotent', 'call', 'builtin'],
      ['list_dir', 'read', 'call', 'builtin'],
      ['exec', 'effect', 'call', 'builtin'],
      ['spawn_child', 'idempotent', 'child-run', 'builtin']
    ])
  })

  it('answers malformed arguments through the catalogue with the same one-line errors as before', async () => {
    const cases: Array<[string, unknown, string]> = [
      ['write_file', '{"path": "out.txt", "content": ', 'Invalid arguments for write_file: not valid JSON'],
      ['write_file', { path: 'a.txt' }, 'Invalid arguments for write_file: missing required field "content"'],
      ['read_file', { path: 7 }, 'Invalid arguments for read_file: field "path" must be a string, got number'],
      ['read_file', '["a.txt"]', 'Invalid arguments for read_file: expected a JSON object, got an array'],
      ['list_dir', { path: false }, 'Invalid arguments for list_dir: field "path" must be a string, got boolean'],
      ['exec', { command: '  ' }, 'Invalid arguments for exec: field "command" must not be empty'],
      ['exec', { command: 'true', timeoutMs: 'soon' }, 'Invalid arguments for exec: field "timeoutMs" must be a positive integer, got "soon"'],
      ['list_dir', TOO_DEEP_ARGUMENTS, 'Invalid arguments for list_dir: nested deeper than 64 levels; send flatter arguments']
    ]
    for (const [name, args, expected] of cases) {
      const outcome = await callIn(builtinCatalogue, name, args)
      expect(outcome.ok, `${name} ${JSON.stringify(args)}`).toBe(false)
      expect(outcome.output.startsWith(expected), `${outcome.output} starts with ${expected}`).toBe(true)
    }
  })

  it('answers an unknown tool, and spawn_child called as a plain call, with the tools it can run', async () => {
    const unknown = 'Unknown tool "teleport". Available tools: read_file, write_file, list_dir, exec'
    expect(await callIn(builtinCatalogue, 'teleport', {})).toEqual({ ok: false, output: unknown })
    expect(await callIn(builtinCatalogue, 'spawn_child', { goal: 'g' })).toEqual({
      ok: false,
      output: 'Unknown tool "spawn_child". Available tools: read_file, write_file, list_dir, exec'
    })
    const more = Either.getOrThrow(makeToolCatalogue([...builtinCatalogue.tools, testTool('lookup', () => Effect.succeed({ ok: true, output: '' }))]))
    expect((await callIn(more, 'teleport', {})).output).toBe(`${unknown}, lookup`)
  })

  it('runs the tools through their definitions, in the workspace of the context', async () => {
    expect(await callIn(builtinCatalogue, 'write_file', { path: 'a/b.txt', content: 'DONE' })).toEqual({ ok: true, output: 'Wrote 4 bytes to a/b.txt' })
    expect(readFileSync(path.join(ws.root, 'a', 'b.txt'), 'utf8')).toBe('DONE')
    expect(await callIn(builtinCatalogue, 'list_dir', {})).toEqual({ ok: true, output: 'a/' })
    expect(await callIn(builtinCatalogue, 'read_file', '{"path":"a/b.txt"}')).toEqual({ ok: true, output: 'DONE' })
    expect((await callIn(builtinCatalogue, 'exec', { command: 'cat a/b.txt' })).output).toContain('stdout:\nDONE')
  })
})

describe('the policy reading of a call', () => {
  it('reads the act and target from the arguments as sent, before they are decoded', () => {
    const act = (name: string, args: unknown) => toolActOf(builtinCatalogue.get(name), typeof args === 'string' ? args : JSON.stringify(args))
    expect(act('read_file', { path: 'src/a.ts' })).toEqual({ act: 'read', target: 'src/a.ts' })
    expect(act('list_dir', {})).toEqual({ act: 'read', target: '.' })
    expect(act('list_dir', '')).toEqual({ act: 'read', target: '.' })
    // A write aimed at a path is judged (and a deny audited) even when its content is missing.
    expect(act('write_file', { path: 'secrets/key' })).toEqual({ act: 'write', target: 'secrets/key' })
    // An empty command is judged too: the sandbox's empty-command rule refuses it.
    expect(act('exec', { command: '' })).toEqual({ act: 'exec', target: '' })
    expect(act('read_file', { path: 7 })).toBeUndefined()
    expect(act('read_file', '[1]')).toBeUndefined()
    expect(act('read_file', 'not json')).toBeUndefined()
    expect(act('spawn_child', { goal: 'g' })).toBeUndefined()
    expect(act('teleport', { path: 'a' })).toBeUndefined()
  })
})

describe('a catalogue', () => {
  it('refuses two tools of one name, naming it', () => {
    const made = makeToolCatalogue([...builtinCatalogue.tools, testTool('exec', () => Effect.succeed({ ok: true, output: '' }))])
    expect(Either.isLeft(made) && made.left).toMatchObject({ _tag: 'ContractError', field: 'tools', message: 'tools: two tools are named "exec"' })
  })

  it('hands a tool its run, step and call, and a key that is the same only for the same call of the same step', async () => {
    const seen: Array<{ runId: string; step: number; callId: string; key: string; root: string }> = []
    const catalogue = Either.getOrThrow(
      makeToolCatalogue([
        testTool('remember', (_args, ctx) =>
          Effect.sync(() => {
            seen.push({ runId: ctx.runId, step: ctx.step, callId: ctx.callId, key: ctx.idempotencyKey, root: ctx.workspace.root })
            return { ok: true, output: 'ok' }
          })
        )
      ])
    )
    await callIn(catalogue, 'remember', {}, ctxAt(0))
    await callIn(catalogue, 'remember', {}, ctxAt(0))
    await callIn(catalogue, 'remember', {}, ctxAt(1))
    await callIn(catalogue, 'remember', {}, ctxAt(0, 2))
    expect(seen[0]).toEqual({ runId: 'run-1', step: 1, callId: 'call-0', key: seen[0]!.key, root: ws.root })
    const keys = seen.map((s) => s.key)
    expect(keys[1]).toBe(keys[0])
    expect(new Set(keys).size).toBe(3)
  })

  it('keeps "never fails" when a tool dies, telling the model which tool', async () => {
    const catalogue = Either.getOrThrow(makeToolCatalogue([testTool('fragile', () => Effect.die(new Error('boom')))]))
    expect(await callIn(catalogue, 'fragile', {})).toEqual({ ok: false, output: 'Tool fragile failed unexpectedly: boom' })
  })
})
