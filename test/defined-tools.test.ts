import { writeFileSync } from 'node:fs'
import * as path from 'node:path'
import { Agentvisor } from '@agentvisor/actors'
import { defineTool } from '@agentvisor/core'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import * as z from 'zod'
import { lastJson, runCli, tempDir } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'

// Tools a team writes (docs/tools.md): registered from TypeScript or loaded from a task's modules.
const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const call = (name: string, args: Record<string, unknown>) => ({ toolCalls: [{ name, arguments: args }] })
const toolMessages = (body: unknown): string[] =>
  ((body as { messages: Array<{ role: string; content: string }> }).messages ?? []).filter((m) => m.role === 'tool').map((m) => m.content)

describe('tools registered with Agentvisor.open({ tools })', () => {
  it('offers a zod-typed tool to an agent that names it, checks its arguments before it runs, and hands it the run context', async () => {
    const seen: Array<{ args: unknown; runId: string; step: number; workspace: string; key: string }> = []
    const lookup = defineTool({
      name: 'lookup_ticket',
      description: 'Looks a ticket up by id',
      input: z.object({ id: z.string().regex(/^T-\d+$/) }),
      effect: 'read',
      run: (args, ctx) => {
        seen.push({ args, runId: ctx.runId, step: ctx.step, workspace: ctx.workspace, key: ctx.idempotencyKey })
        return { id: args.id, title: 'Login fails' }
      }
    })
    mock = await startMock([call('lookup_ticket', { id: '42' }), call('lookup_ticket', { id: 'T-42' }), { text: 'Login fails' }])
    const dir = tempDir()
    const av = await Agentvisor.open({ db: path.join(dir, 'av.db'), tools: [lookup] })
    try {
      const result = await av.run(
        Agentvisor.contract(
          { goal: 'Look T-42 up', workspace: 'ws', providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }], tools: ['lookup_ticket'] },
          dir
        )
      )
      expect(result).toMatchObject({ status: 'succeeded', steps: 3, output: 'Login fails' })
      // The bad id never reached run; the good one did, with the run's own context.
      expect(seen).toEqual([{ args: { id: 'T-42' }, runId: result.runId, step: 2, workspace: path.join(dir, 'ws'), key: `${result.runId}:2:0` }])
      const offered = (mock.requests[0]!.body as { tools: Array<{ function: { name: string; parameters: Record<string, unknown> } }> }).tools
      expect(offered.map((t) => t.function.name)).toEqual(['lookup_ticket'])
      expect(offered[0]!.function.parameters).toMatchObject({ type: 'object', properties: { id: { type: 'string' } }, required: ['id'] })
      expect(toolMessages(mock.requests[1]!.body)[0]).toMatch(/^Invalid arguments for lookup_ticket: \/id: /)
      expect(JSON.parse(toolMessages(mock.requests[2]!.body)[1]!)).toEqual({ id: 'T-42', title: 'Login fails' })
    } finally {
      await av.close()
    }
  })
})

describe('tool modules of a task file', () => {
  const fixture = (name: string) => path.join(import.meta.dirname, 'fixtures', 'tools', name)

  it.each([
    ['throws on import', 'throws.mjs', /^toolModules\.0 \(.*throws\.mjs\): cannot load: no database configured$/],
    ['has a tool with an invalid JSON Schema', fixture('invalid-schema.mjs'), /^toolModules\.0 \(.*invalid-schema\.mjs\): .*"bad"/],
    ['has a tool named like a built-in', fixture('clashes-with-builtin.mjs'), /^toolModules\.0 \(.*clashes-with-builtin\.mjs\): .*read_file/]
  ])('stops a run whose tool module %s: exit 2, one line, no stack, no run', async (_what, module, message) => {
    const dir = tempDir()
    writeFileSync(path.join(dir, 'throws.mjs'), "throw new Error('no database configured')\n")
    const task = {
      goal: 'Use the tools',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm' }],
      toolModules: [module]
    }
    const file = path.join(dir, 'task.json')
    writeFileSync(file, JSON.stringify(task))
    const db = path.join(dir, 'av.db')
    const result = await runCli(['run', file, '--json', '--db', db], { cwd: dir })
    expect(result.code, result.stderr).toBe(2)
    expect(result.stderr).not.toContain('    at ')
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(lastJson<{ error: { message: string } }>(result).error.message).toMatch(message as RegExp)
    expect(lastJson(await runCli(['runs', '--json', '--db', db]))).toEqual([])
  })
})
