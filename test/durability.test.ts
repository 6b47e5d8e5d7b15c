import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import { Agentvisor } from '@agentvisor/actors'
import type { MockLlm } from '@agentvisor/cli'
import { acquireLease, listTransitions, openStore } from '@agentvisor/store'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, waitFor, mockTaskFolder, startRunInBackground as startRun } from './support/cli.js'
import { killMatching, processesMatching } from './support/processes.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { runCall } from './support/run-call.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const exec = (command: string) => ({ toolCalls: [{ name: 'exec', arguments: { command } }] })
const writeDone = { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }

const setup = async (steps: unknown[], task: Record<string, unknown> = {}) => {
  mock = await startMock(steps)
  return mockTaskFolder(mock.url, { approval: 'auto', ...task })
}

describe('crash and resume', () => {
  it('resumes a run killed during a slow dispatch without repeating the exec of the step before', async () => {
    const { file, db, ws } = await setup([exec('echo line >> log.txt'), { delayMs: 60_000, text: 'lost' }, writeDone])
    const run = startRun(file, db)
    await waitFor(() => (mock!.requests.length === 2 ? true : undefined), 'the slow dispatch')
    process.kill(run.pid(), 'SIGKILL')
    await run.done
    const runId = await run.runId()
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toEqual({ runId, status: 'succeeded', steps: 2, usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) } })
    expect(readFileSync(path.join(ws, 'log.txt'), 'utf8')).toBe('line\n')
  })
})

describe('interrupted runs', () => {
  it('are listed as interrupted and all picked up by resume --all', async () => {
    const { file, db, ws } = await setup([{ delayMs: 60_000, text: 'lost' }, writeDone])
    const run = startRun(file, db)
    const runId = await run.runId()
    await waitFor(() => (mock!.requests.length === 1 ? true : undefined), 'the slow dispatch')
    process.kill(run.pid(), 'SIGKILL')
    await run.done
    const listed = await runCli(['runs', '--db', db])
    expect(listed.stdout).toMatch(new RegExp(`${runId}\\s+running \\(interrupted\\)`))
    const all = await runCli(['resume', '--all', '--json', '--db', db])
    expect(all.code, all.stderr).toBe(0)
    expect(lastJson(all)).toEqual([{ runId, status: 'succeeded', steps: 1, usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) } }])
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE')
    const after = await runCli(['runs', '--db', db])
    expect(after.stdout).not.toContain('interrupted')
  })
})

describe('cancel and timeout', () => {
  const lateExec = (marker: string) => exec(`sleep ${marker} && echo late > late.txt`)

  it('cancels on SIGINT during an exec: status cancelled, no late write, no process left', async () => {
    const marker = '3.0417'
    const { file, db, ws } = await setup([lateExec(marker)])
    const run = startRun(file, db)
    await waitFor(() => (processesMatching(`sleep ${marker}`).length > 0 ? true : undefined), 'the exec')
    process.kill(run.pid(), 'SIGINT')
    const result = await run.done
    expect(result.code).toBe(1)
    expect(lastJson(result)).toMatchObject({ status: 'cancelled', error: { kind: 'cancelled' } })
    expect(processesMatching(`sleep ${marker}`)).toEqual([])
    await sleep(3500)
    expect(existsSync(path.join(ws, 'late.txt'))).toBe(false)
  })

  it('times out after timeoutMs during an exec: timed_out, kind timeout, no late write', async () => {
    const marker = '3.0419'
    const { file, db, ws } = await setup([lateExec(marker)], { limits: { timeoutMs: 1200 } })
    const result = await runCli(['run', file, '--json', '--db', db])
    expect(result.code).toBe(1)
    expect(lastJson(result)).toMatchObject({ status: 'timed_out', error: { kind: 'timeout' } })
    expect(processesMatching(`sleep ${marker}`)).toEqual([])
    await sleep(3500)
    expect(existsSync(path.join(ws, 'late.txt'))).toBe(false)
  })

  it('cancels a run from another process through the store within a second', async () => {
    const marker = '20.0421'
    const { file, db, ws } = await setup([lateExec(marker)])
    const run = startRun(file, db)
    const runId = await run.runId()
    await waitFor(() => (processesMatching(`sleep ${marker}`).length > 0 ? true : undefined), 'the exec')
    const cancel = await runCli(['cancel', runId, '--db', db])
    expect(cancel.code, cancel.stderr).toBe(0)
    expect(cancel.stderr).toContain(`run ${runId} cancelled`)
    const result = await run.done
    expect(lastJson(result)).toMatchObject({ runId, status: 'cancelled' })
    expect(processesMatching(`sleep ${marker}`)).toEqual([])
    expect(existsSync(path.join(ws, 'late.txt'))).toBe(false)
  })

  it('cancels a paused run that nobody drives', async () => {
    const { file, db } = await setup([writeDone], { approval: 'defer' })
    const paused = await runCli(['run', file, '--json', '--db', db])
    expect(paused.code).toBe(3)
    const { runId } = lastJson<{ runId: string }>(paused)
    const cancel = await runCli(['cancel', runId, '--json', '--db', db])
    expect(cancel.code, cancel.stderr).toBe(0)
    expect(lastJson(cancel)).toEqual({ runId, status: 'cancelled' })
    const runs = lastJson<Array<{ id: string; status: string }>>(await runCli(['runs', '--json', '--db', db]))
    expect(runs).toEqual([expect.objectContaining({ id: runId, status: 'cancelled' })])
  })
})

describe('one driver per run', () => {
  it('refuses a second live driver with a conflict error while the first makes progress', async () => {
    // The first driver waits in an exec until the test lets it go: no race with slow start-ups.
    const { file, db, ws } = await setup([exec('while [ ! -f go ]; do sleep 0.05; done'), writeDone])
    const run = startRun(file, db)
    const runId = await run.runId()
    await waitFor(() => (mock!.requests.length === 1 ? true : undefined), 'the first dispatch')
    const second = await runCli(['resume', runId, '--db', db])
    expect(second.code).toBe(2)
    expect(second.stderr.trim()).toMatch(new RegExp(`^agentvisor: run ${runId} is being driven by .+/${run.pid()}/`))
    writeFileSync(path.join(ws, 'go'), '')
    const first = await run.done
    expect(lastJson(first)).toMatchObject({ status: 'succeeded' })
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE')
    expect(mock!.requests).toHaveLength(2)
  })

  it('rejects every write of a driver whose lease was taken over (fencing)', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const av = await Agentvisor.open({ db })
    try {
      const run = await av.start({
        goal: 'g',
        workspace: path.join(dir, 'ws'),
        approval: 'auto',
        providers: [
          { name: 'p', kind: 'scripted', steps: [{ delayMs: 800, toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'x' } }] }] }
        ]
      })
      const store = await openStore(db)
      try {
        // Another driver takes the run over (as if this one's lease had expired).
        const takeover = await runCall(
          acquireLease(store.db, {
            runId: run.runId,
            owner: 'other-host/1/x',
            now: Date.now() + 3_600_000,
            ttlMs: 60_000,
            isAbandoned: () => false
          })
        )
        expect(takeover).toEqual({ token: 2 })
        const result = await run.result
        expect(result.error?.message).toMatch(/lease was taken over/)
        expect(await runCall(listTransitions(store.db, run.runId))).toEqual([])
        expect(existsSync(path.join(dir, 'ws', 'out.txt'))).toBe(false)
      } finally {
        await store.close()
      }
    } finally {
      await av.close()
    }
  })
})

describe('an exec interrupted after it started', () => {
  const interrupted = async (marker: string) => {
    const command = `echo ran >> effects.txt; test -f fast || sleep ${marker}`
    const ctx = await setup([exec(command), writeDone])
    const run = startRun(ctx.file, ctx.db)
    const runId = await run.runId()
    await waitFor(() => (processesMatching(`sleep ${marker}`).length > 0 ? true : undefined), 'the exec')
    process.kill(run.pid(), 'SIGKILL')
    await run.done
    killMatching(`sleep ${marker}`)
    writeFileSync(path.join(ctx.ws, 'fast'), '')
    const paused = await runCli(['resume', runId, '--json', '--db', ctx.db])
    expect(paused.code).toBe(3)
    expect(lastJson(paused)).toMatchObject({ status: 'awaiting_approval' })
    expect(paused.stderr).toContain('interrupted after it started')
    expect(readFileSync(path.join(ctx.ws, 'effects.txt'), 'utf8')).toBe('ran\n')
    return { ...ctx, runId }
  }

  it('runs it exactly once more on retry', async () => {
    const { db, ws, runId } = await interrupted('30.0431')
    expect((await runCli(['approve', runId, '--retry', '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(lastJson(resumed)).toMatchObject({ status: 'succeeded' })
    expect(readFileSync(path.join(ws, 'effects.txt'), 'utf8')).toBe('ran\nran\n')
    expect((await runCli(['approve', runId, '--retry', '--db', db])).code).toBe(2)
  })

  it('does not run it again when the operator says it completed, and tells the model', async () => {
    const { db, ws, runId } = await interrupted('30.0433')
    expect((await runCli(['approve', runId, '--completed', 'it printed ran once', '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(lastJson(resumed)).toMatchObject({ status: 'succeeded' })
    expect(readFileSync(path.join(ws, 'effects.txt'), 'utf8')).toBe('ran\n')
    const told = JSON.stringify(mock!.requests.at(-1)!.body)
    expect(told).toContain('it printed ran once')
  })

  it('ends the run on abort', async () => {
    const { db, ws, runId } = await interrupted('30.0435')
    expect((await runCli(['approve', runId, '--abort', '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code).toBe(1)
    expect(lastJson(resumed)).toMatchObject({ status: 'cancelled', error: { kind: 'cancelled' } })
    expect(existsSync(path.join(ws, 'out.txt'))).toBe(false)
    expect(readFileSync(path.join(ws, 'effects.txt'), 'utf8')).toBe('ran\n')
  })
})
