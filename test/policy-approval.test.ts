import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { waitForLeaseHolderGone } from './support/processes.js'
import { BIN, lastJson, runCli, tempDir, waitFor, mockTaskFolder } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { storedTrace } from './support/stored-trace.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

interface Trace {
  run: { id: string; status: string }
  policyEvents: Array<Record<string, unknown>>
  approvals: Array<Record<string, unknown>>
  transitions: Array<{ event: string; to: string }>
}

const write = (p: string, content = 'DONE') => ({ name: 'write_file', arguments: { path: p, content } })
const exec = (command: string) => ({ name: 'exec', arguments: { command } })

const setup = async (steps: unknown[], task: Record<string, unknown> = {}, dir = tempDir()) => {
  mock = await startMock(steps)
  return mockTaskFolder(mock.url, { approval: 'defer', ...task }, dir)
}

const show = (db: string, runId: string) => storedTrace<Trace>(db, runId)
const toolMessages = (m: MockLlm, request: number) =>
  ((m.requests[request]!.body as { messages: Array<{ role: string; content: string }> }).messages ?? []).filter((x) => x.role === 'tool').map((x) => x.content)

describe('policy layers', () => {
  it('refuses a base-layer deny on secrets/** although a later layer allows **, naming rule and layer', async () => {
    const { file, db, ws } = await setup([{ toolCalls: [write('secrets/key.txt', 'k'), write('out.txt')] }], {
      policy: {
        layers: [
          { name: 'base', deny: { write: ['secrets/**'] } },
          { name: 'team', allow: { read: ['**'], write: ['**'] } }
        ]
      }
    })
    const run = await runCli(['run', file, '--json', '--db', db])
    expect(run.code, run.stderr).toBe(0)
    expect(existsSync(path.join(ws, 'secrets', 'key.txt'))).toBe(false)
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE')
    const trace = await show(db, String(lastJson(run)['runId']))
    expect(trace.policyEvents).toEqual([
      expect.objectContaining({
        step: 1,
        kind: 'refusal',
        act: 'write',
        target: 'secrets/key.txt',
        rule: 'secrets/**',
        layer: 'base',
        decision: 'deny',
        source: 'policy'
      })
    ])
  })

  it('never runs a denied exec, tells the model, and goes on', async () => {
    const { dir, file, db, ws } = await setup([{ toolCalls: [exec('rm -rf keep')] }, { toolCalls: [write('out.txt')] }], {
      policy: {
        layers: [
          { name: 'base', deny: { exec: ['rm *'] } },
          { name: 'team', allow: { write: ['out.txt'] } }
        ]
      }
    })
    mkdirSync(path.join(ws, 'keep'), { recursive: true })
    const run = await runCli(['run', file, '--json', '--db', db])
    expect(run.code, run.stderr).toBe(0)
    expect(existsSync(path.join(ws, 'keep'))).toBe(true)
    expect(toolMessages(mock!, 1)[0]).toMatch(/^Refused by policy: exec "rm -rf keep" refused by rule "rm \*" in layer "base"/)
    const trace = await show(db, String(lastJson(run)['runId']))
    expect(trace.policyEvents[0]).toMatchObject({ act: 'exec', rule: 'rm *', layer: 'base', kind: 'refusal' })
    expect(dir).toBeTruthy()
  })

  it('records a sandbox refusal for a path escape with rule workspace and layer sandbox', async () => {
    const { file, db } = await setup([{ toolCalls: [{ name: 'read_file', arguments: { path: '../../etc/passwd' } }, write('out.txt')] }], {
      policy: { layers: [{ name: 'team', allow: { write: ['out.txt'] } }] }
    })
    const run = await runCli(['run', file, '--json', '--db', db])
    expect(run.code, run.stderr).toBe(0)
    const trace = await show(db, String(lastJson(run)['runId']))
    expect(trace.policyEvents).toEqual([expect.objectContaining({ kind: 'refusal', act: 'read', rule: 'workspace', layer: 'sandbox' })])
  })
})

describe('approvals that survive the process', () => {
  it('pauses with exit 3 and nothing written; approve then resume performs it without asking the model again', async () => {
    const { file, db, ws } = await setup([{ toolCalls: [write('out.txt')] }, { text: 'should never be asked' }])
    const run = await runCli(['run', file, '--json', '--db', db])
    expect(run.code).toBe(3)
    const { runId } = lastJson<{ runId: string }>(run)
    expect(lastJson(run)).toMatchObject({ status: 'awaiting_approval', steps: 1 })
    expect(run.stderr).toContain(`agentvisor approve ${runId}`)
    expect(existsSync(path.join(ws, 'out.txt'))).toBe(false)
    const paused = await show(db, runId)
    expect(paused.approvals).toEqual([
      expect.objectContaining({ step: 1, act: 'write', target: 'out.txt', status: 'pending', rule: 'default', layer: 'default' })
    ])

    const approve = await runCli(['approve', runId, '--db', db])
    expect(approve.code, approve.stderr).toBe(0)
    // A decision that lands while the run is paused holds: nothing ran yet.
    expect(existsSync(path.join(ws, 'out.txt'))).toBe(false)

    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toEqual({ runId, status: 'succeeded', steps: 1, usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) } })
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE')
    expect(mock!.requests).toHaveLength(1)
    const trace = await show(db, runId)
    expect(trace.approvals).toEqual([expect.objectContaining({ status: 'approved', source: 'cli' })])
    expect(trace.policyEvents).toEqual([expect.objectContaining({ kind: 'decision', decision: 'approved', source: 'cli', act: 'write', target: 'out.txt' })])
    expect(trace.transitions.map((t) => t.to)).toEqual(['acting', 'awaitingApproval', 'acting', 'verifying', 'finished.succeeded'])
  })

  it('feeds a denial back to the model and goes on without running the call', async () => {
    const { file, db, ws } = await setup([{ toolCalls: [exec('touch made.txt')] }, { toolCalls: [write('out.txt')] }], {
      policy: { layers: [{ name: 'team', allow: { write: ['out.txt'] } }] }
    })
    const { runId } = lastJson<{ runId: string }>(await runCli(['run', file, '--json', '--db', db]))
    expect((await runCli(['approve', runId, '--deny', '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(existsSync(path.join(ws, 'made.txt'))).toBe(false)
    expect(toolMessages(mock!, 1)[0]).toMatch(/^Denied by cli: exec touch made.txt/)
  })

  it('applies a remembered allow in a later run of the workspace without asking, but never over a deny', async () => {
    const dir = tempDir()
    const first = await setup([{ toolCalls: [write('out.txt')] }], {}, dir)
    const { runId } = lastJson<{ runId: string }>(await runCli(['run', first.file, '--json', '--db', first.db]))
    expect((await runCli(['approve', runId, '--remember', '--db', first.db])).code).toBe(0)
    expect((await runCli(['resume', runId, '--db', first.db])).code).toBe(0)
    await mock!.close()

    const second = await setup([{ toolCalls: [write('out.txt')] }], {}, dir)
    const again = await runCli(['run', second.file, '--json', '--db', second.db])
    expect(again.code, again.stderr).toBe(0)
    const trace = await show(second.db, String(lastJson(again)['runId']))
    expect(trace.approvals).toEqual([])
    expect(trace.policyEvents).toEqual([expect.objectContaining({ kind: 'decision', decision: 'approved', source: 'remembered', layer: 'remembered' })])
    await mock!.close()

    const third = await setup(
      [{ toolCalls: [write('out.txt', 'NOPE')] }],
      {
        policy: { layers: [{ name: 'base', deny: { write: ['out.txt'] } }] },
        verify: { fileContains: { path: 'out.txt', text: 'NOPE' } },
        limits: { maxSteps: 1 }
      },
      dir
    )
    const denied = await runCli(['run', third.file, '--json', '--db', third.db])
    expect(denied.code).toBe(1)
    expect(readFileSync(path.join(third.ws, 'out.txt'), 'utf8')).toBe('DONE')
    const deniedTrace = await show(third.db, String(lastJson(denied)['runId']))
    expect(deniedTrace.policyEvents).toEqual([expect.objectContaining({ kind: 'refusal', rule: 'out.txt', layer: 'base' })])
  })

  it('refuses an edited approval that crosses a deny, and performs an allowed edit, auditing both targets', async () => {
    const { file, db, ws } = await setup([{ toolCalls: [write('draft.txt', 'x')] }, { toolCalls: [write('out.txt')] }], {
      policy: {
        layers: [
          { name: 'base', deny: { write: ['secrets/**'] } },
          { name: 'team', allow: { write: ['out.txt'] } }
        ]
      }
    })
    const { runId } = lastJson<{ runId: string }>(await runCli(['run', file, '--json', '--db', db]))
    const crossing = await runCli(['approve', runId, '--edit', '{"path": "secrets/x.txt", "content": "x"}', '--db', db])
    expect(crossing.code).toBe(2)
    expect(crossing.stderr.trim()).toMatch(/^agentvisor: the edited action is refused: write secrets\/x.txt refused by rule "secrets\/\*\*" in layer "base"$/)
    expect((await show(db, runId)).approvals[0]).toMatchObject({ status: 'pending' })

    expect((await runCli(['approve', runId, '--edit', '{"path": "final.txt", "content": "edited"}', '--db', db])).code).toBe(0)
    expect((await runCli(['resume', runId, '--db', db])).code).toBe(0)
    expect(existsSync(path.join(ws, 'draft.txt'))).toBe(false)
    expect(existsSync(path.join(ws, 'secrets'))).toBe(false)
    expect(readFileSync(path.join(ws, 'final.txt'), 'utf8')).toBe('edited')
    const trace = await show(db, runId)
    expect(trace.approvals[0]).toMatchObject({ status: 'approved', target: 'draft.txt', editedArguments: { path: 'final.txt', content: 'edited' } })
    expect(trace.policyEvents[0]).toMatchObject({ kind: 'decision', target: 'draft.txt', performedTarget: 'final.txt' })
    expect(toolMessages(mock!, 1)[0]).toMatch(/^Approved with edits/)
  })

  it('keeps the pending request when the process is killed while it asks on the terminal', async () => {
    const { file, db, ws } = await setup([{ toolCalls: [write('out.txt')] }], { approval: 'prompt' })
    // `script` gives the CLI a real terminal, so it prompts instead of deferring.
    const child = spawn('script', ['-qfec', `${process.execPath} ${BIN} run ${file} --db ${db}`, '/dev/null'], {
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe']
    })
    let screen = ''
    child.stdout.on('data', (d: Buffer) => (screen += d.toString()))
    const exited = new Promise((r) => child.once('exit', r))
    await waitFor(() => (screen.includes('approve? [y]es') ? true : undefined), 'the approval prompt')
    process.kill(-child.pid!, 'SIGKILL')
    await exited
    const runId = /run (\S+) started/.exec(screen)![1]!
    await waitForLeaseHolderGone(db, runId)
    const trace = await show(db, runId)
    expect(trace.run.status).toBe('awaiting_approval')
    expect(trace.approvals).toEqual([expect.objectContaining({ status: 'pending', target: 'out.txt' })])
    expect(existsSync(path.join(ws, 'out.txt'))).toBe(false)

    expect((await runCli(['approve', runId, '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(lastJson(resumed)).toMatchObject({ status: 'succeeded' })
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE')
  })

  it('answers at the terminal prompt and finishes the run in the same process', async () => {
    const { file, db, ws } = await setup([{ toolCalls: [write('out.txt')] }], { approval: 'prompt' })
    const child = spawn('script', ['-qfec', `${process.execPath} ${BIN} run ${file} --db ${db}`, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] })
    let screen = ''
    child.stdout.on('data', (d: Buffer) => (screen += d.toString()))
    const exited = new Promise<number | null>((r) => child.once('exit', r))
    await waitFor(() => (screen.includes('approve? [y]es') ? true : undefined), 'the approval prompt')
    child.stdin.write('y\n')
    expect(await exited).toBe(0)
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE')
    const runId = /run (\S+) started/.exec(screen)![1]!
    expect((await show(db, runId)).policyEvents).toEqual([expect.objectContaining({ kind: 'decision', source: 'prompt', decision: 'approved' })])
  })
})

describe('agentvisor approve with bad input', () => {
  it('exits 2 for a run without pending requests and for malformed --edit', async () => {
    const { file, db } = await setup([{ toolCalls: [write('out.txt')] }], { approval: 'auto' })
    const { runId } = lastJson<{ runId: string }>(await runCli(['run', file, '--json', '--db', db]))
    const none = await runCli(['approve', runId, '--db', db])
    expect(none.code).toBe(2)
    expect(none.stderr.trim()).toBe(`agentvisor: run ${runId} has no pending approval requests`)
    const bad = await runCli(['approve', runId, '--edit', '{nope', '--db', db])
    expect(bad.code).toBe(2)
    expect(bad.stderr.trim().split('\n')).toHaveLength(1)
  })
})
