import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, waitFor, mockTaskFolder, startRunInBackground as startRun } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'

// Tools of a tool module with side effects (test/fixtures/tools/journal-tools.mjs), journalled by
// their effect class like the built-ins (docs/tools.md, "Effect classes").
const TOOLS = path.join(import.meta.dirname, 'fixtures', 'tools', 'journal-tools.mjs')

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const call = (name: string, args: Record<string, unknown> = {}) => ({ toolCalls: [{ name, arguments: args }] })
const writeDone = call('write_file', { path: 'out.txt', content: 'DONE' })

const setup = async (steps: unknown[], task: Record<string, unknown> = {}) => {
  mock = await startMock(steps)
  const made = mockTaskFolder(mock.url, {
    tools: ['write_file', 'append_line', 'record_key'],
    toolModules: [TOOLS],
    policy: { layers: [{ name: 'team', allow: { tool: ['append_line', 'record_key'], write: ['out.txt'] } }] },
    approval: 'defer',
    ...task
  })
  mkdirSync(made.ws)
  return made
}

const lines = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [])

describe('a custom effect tool across a crash', () => {
  it('is never run again once its step committed: killed during the next dispatch, the resumed run replays its result', async () => {
    const { file, db, ws } = await setup([call('append_line', { line: 'once' }), { delayMs: 60_000, text: 'slow' }, writeDone])
    const run = startRun(file, db)
    const runId = await run.runId()
    await waitFor(() => (mock!.requests.length >= 2 ? true : undefined), 'the second dispatch')
    process.kill(run.pid(), 'SIGKILL')
    await run.done
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lines(path.join(ws, 'effects.txt'))).toEqual(['once'])
    const trace = lastJson<{ steps: Array<{ toolCalls: Array<Record<string, unknown>> }> }>(await runCli(['show', runId, '--json', '--db', db]))
    expect(trace.steps[0]!.toolCalls[0]).toMatchObject({ name: 'append_line', source: 'module', effect: 'effect' })
  })

  const killedMidCall = async () => {
    const ctx = await setup([call('append_line', { line: 'ran' }), writeDone])
    writeFileSync(path.join(ctx.ws, 'hang'), '')
    const run = startRun(ctx.file, ctx.db)
    const runId = await run.runId()
    await waitFor(() => (lines(path.join(ctx.ws, 'effects.txt')).length > 0 ? true : undefined), 'the call under way')
    process.kill(run.pid(), 'SIGKILL')
    await run.done
    rmSync(path.join(ctx.ws, 'hang'))
    const paused = await runCli(['resume', runId, '--json', '--db', ctx.db])
    expect(paused.code, paused.stderr).toBe(3)
    expect(lastJson(paused)).toMatchObject({ status: 'awaiting_approval' })
    expect(paused.stderr).toContain('interrupted after it started')
    expect(lines(path.join(ctx.ws, 'effects.txt'))).toEqual(['ran'])
    return { ...ctx, runId }
  }

  it('killed mid-call, waits for a recovery decision and runs exactly once more on --retry', async () => {
    const { db, ws, runId } = await killedMidCall()
    expect((await runCli(['approve', runId, '--retry', '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(lastJson(resumed)).toMatchObject({ status: 'succeeded' })
    expect(lines(path.join(ws, 'effects.txt'))).toEqual(['ran', 'ran'])
  })

  it('killed mid-call, is never run again on --completed, and the model is told', async () => {
    const { db, ws, runId } = await killedMidCall()
    expect((await runCli(['approve', runId, '--completed', 'the line is there', '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(lastJson(resumed)).toMatchObject({ status: 'succeeded' })
    expect(lines(path.join(ws, 'effects.txt'))).toEqual(['ran'])
    expect(JSON.stringify(mock!.requests.at(-1)!.body)).toContain('the line is there')
  })
})

describe('a custom idempotent tool across a crash', () => {
  it('killed mid-call, is run again on resume with the same idempotency key, without asking anyone', async () => {
    const { file, db, ws } = await setup([call('record_key'), writeDone])
    writeFileSync(path.join(ws, 'hang'), '')
    const run = startRun(file, db)
    const runId = await run.runId()
    await waitFor(() => (lines(path.join(ws, 'keys.txt')).length > 0 ? true : undefined), 'the call under way')
    process.kill(run.pid(), 'SIGKILL')
    await run.done
    rmSync(path.join(ws, 'hang'))
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    const keys = lines(path.join(ws, 'keys.txt'))
    expect(keys).toHaveLength(2)
    expect(keys[1]).toBe(keys[0])
    expect(keys[0]).toBe(`${runId}:1:0`)
  })
})

describe('approvals of a custom tool', () => {
  it('asks before an effect tool no rule covers, and runs the call as an approver edited it', async () => {
    // No rule covers append_line: an `effect` tool asks.
    const { dir, file, db } = await setup([call('append_line', { line: 'asked' }), writeDone], {
      tools: ['write_file', 'append_line'],
      policy: { layers: [{ name: 'team', allow: { write: ['out.txt'] } }] }
    })
    const paused = await runCli(['run', file, '--json', '--db', db])
    expect(paused.code, paused.stderr).toBe(3)
    const runId = lastJson<{ runId: string }>(paused).runId
    expect(existsSync(path.join(dir, 'ws', 'effects.txt'))).toBe(false)
    const approved = await runCli(['approve', runId, '--edit', '{"line":"edited"}', '--db', db])
    expect(approved.code, approved.stderr).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(lastJson(resumed)).toMatchObject({ status: 'succeeded' })
    expect(lines(path.join(dir, 'ws', 'effects.txt'))).toEqual(['edited'])
    const trace = lastJson<{ approvals: Array<Record<string, unknown>> }>(await runCli(['show', runId, '--json', '--db', db]))
    expect(trace.approvals).toEqual([expect.objectContaining({ act: 'tool', target: 'append_line', status: 'approved', rule: 'default', layer: 'default' })])
  })
})
