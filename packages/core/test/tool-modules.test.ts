import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Effect, Either } from 'effect'
import { afterAll, describe, expect, it } from 'vitest'
import { BUILTIN_TOOLS, loadToolModules, makeToolCatalogue, RunToolContext, runToolCall, type ToolModuleError } from '@agentvisor/core'

/** The folder a task file listing the fixtures would be in. */
const FIXTURES = fileURLToPath(new URL('./fixtures/tool-modules/', import.meta.url))

const scratch = mkdtempSync(path.join(tmpdir(), 'agentvisor-tool-modules-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const load = (paths: ReadonlyArray<string>, baseDir = FIXTURES) => Effect.runPromise(loadToolModules(paths, baseDir))

/** The error loading `paths` fails with, which must be one line. */
const loadError = async (paths: ReadonlyArray<string>, baseDir = FIXTURES): Promise<ToolModuleError> => {
  const result = await Effect.runPromise(Effect.either(loadToolModules(paths, baseDir)))
  if (Either.isRight(result)) throw new Error(`loaded ${result.right.map((tool) => tool.name).join(', ')}`)
  expect(result.left._tag).toBe('ToolModuleError')
  expect(result.left.message).not.toContain('\n')
  return result.left
}

describe('loading tool modules', () => {
  it('makes a tool of every defineTool export, named, default or in an array, once each, and nothing of the rest', async () => {
    const tools = await load(['./tickets.mjs', './zod-tools.mjs'])
    // By module, then by export name: default (an array), findTicket and lookupTicket (one tool), then zod-tools.
    expect(tools.map((tool) => [tool.name, tool.source, tool.effect])).toEqual([
      ['close_ticket', 'module', 'idempotent'],
      ['reopen_ticket', 'module', 'effect'],
      ['lookup_ticket', 'module', 'read'],
      ['add_label', 'module', 'effect']
    ])
    const catalogue = Either.getOrThrow(makeToolCatalogue([...BUILTIN_TOOLS, ...tools]))
    const ctx = new RunToolContext('run-1', 2, 0, 'call-1', { root: scratch }, {})
    const call = (name: string, args: unknown) => Effect.runPromise(runToolCall(catalogue, catalogue.get(name), { name, arguments: JSON.stringify(args) }, ctx))
    expect(await call('lookup_ticket', { id: 'T-3' })).toEqual({ ok: true, output: '{"id":"T-3","title":"Ticket T-3","status":"open"}' })
    expect(await call('close_ticket', { id: 'T-3' })).toEqual({ ok: true, output: 'closed T-3 (run-1:2:0)' })
    expect(await call('add_label', { id: 'T-3', label: 'ab', times: 2 })).toEqual({ ok: true, output: 'T-3: abab' })
    expect(await call('add_label', { id: 'X', label: 'ab' })).toMatchObject({
      ok: false,
      output: expect.stringMatching(/^Invalid arguments for add_label: \/id: /)
    })
    expect(catalogue.get('add_label')?.spec.parameters).toMatchObject({ type: 'object', required: ['id', 'label'] })
  })

  it('imports a module once per process, whatever the path that names it', async () => {
    const first = await load(['./tickets.mjs'])
    const again = await load(['../tickets.mjs'], path.join(FIXTURES, 'elsewhere'))
    expect(again).toEqual(first)
    for (const [index, tool] of again.entries()) expect(tool).toBe(first[index])
    expect((globalThis as { __ticketsModuleLoads?: number }).__ticketsModuleLoads).toBe(1)
  })

  it('fails with one line naming the field and path of a module that throws on import', async () => {
    const error = await loadError(['./tickets.mjs', './throws-on-import.mjs'])
    expect(error.message).toBe('toolModules.1 (./throws-on-import.mjs): cannot load: TICKETS_URL is not set (set it in the environment)')
    expect([error.field, error.module]).toEqual(['toolModules.1', './throws-on-import.mjs'])
  })

  it('fails with one line naming the file for a module that does not exist', async () => {
    expect((await loadError(['./missing.mjs'])).message).toBe(`toolModules.0 (./missing.mjs): cannot load: no such file ${FIXTURES}missing.mjs`)
  })

  it('fails for a module that exports no tools', async () => {
    expect((await loadError(['./no-tools.mjs'])).message).toBe('toolModules.0 (./no-tools.mjs): exports no tools (defineTool values, or arrays of them)')
  })

  it('fails naming the module and the tool whose definition fails', async () => {
    expect((await loadError(['./tickets.mjs', './bad-definition.mjs'])).message).toBe(
      'toolModules.1 (./bad-definition.mjs): tool "count_tickets": input must be an object schema (type "object"), got type "string"'
    )
  })

  it('fails naming both places of two tools of one name', async () => {
    expect((await loadError(['./tickets.mjs', './same-name.mjs'])).message).toBe(
      'toolModules.1 (./same-name.mjs): two tools are named "lookup_ticket": export findTicket of toolModules.0 (./tickets.mjs) and export default of toolModules.1 (./same-name.mjs)'
    )
  })

  it('fails for a tool named like a built-in tool', async () => {
    expect((await loadError(['./builtin-name.mjs'])).message).toBe(
      'toolModules.0 (./builtin-name.mjs): tool "read_file" (export readFile) has the name of a built-in tool'
    )
  })

  it('takes a module listed twice, or by two paths, as the same tools, not as a clash', async () => {
    const tools = await load(['./tickets.mjs', `${FIXTURES}tickets.mjs`])
    expect(tools.map((tool) => tool.name)).toEqual(['close_ticket', 'reopen_ticket', 'lookup_ticket'])
  })

  it('tries a module that could not be imported again on the next load', async () => {
    const later = path.join(scratch, 'later.mjs')
    expect((await loadError(['./later.mjs'], scratch)).message).toMatch(/^toolModules\.0 \(\.\/later\.mjs\): cannot load: /)
    copyFileSync(path.join(FIXTURES, 'no-tools.mjs'), later)
    expect((await loadError(['./later.mjs'], scratch)).message).toBe('toolModules.0 (./later.mjs): exports no tools (defineTool values, or arrays of them)')
  })

  it('refuses a marked export of another shape version rather than misread it', async () => {
    const future = path.join(scratch, 'future.mjs')
    writeFileSync(future, "export const next = { [Symbol.for('agentvisor.defineTool')]: 2, name: 'next' }\n")
    expect((await loadError(['./future.mjs'], scratch)).message).toBe('toolModules.0 (./future.mjs): export next is a tool of another agentvisor version')
  })
})
