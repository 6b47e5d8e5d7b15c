import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
// Only the plain NATS client: this is what a service in any language does, no agentvisor code.
import type { NatsConnection } from '@nats-io/transport-node'
import { AgentvisorClient } from '@agentvisor/actors'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { natsWorldPerTest } from './support/nats.js'

const startMock = mockLlmPerTest()
// The default subjects, stream and consumer: what a service in another language talks to.
const natsWorld = natsWorldPerTest({ defaultSubjects: true })
let nc: NatsConnection | undefined

const ask = async (subject: string, payload: string | object): Promise<Record<string, unknown>> => {
  const data = typeof payload === 'string' ? payload : JSON.stringify(payload)
  const reply = await nc!.request(subject, new TextEncoder().encode(data), { timeout: 60_000 })
  return JSON.parse(new TextDecoder().decode(reply.data)) as Record<string, unknown>
}

describe('supervising runs from another service over raw NATS', () => {
  it('reads status, approves a pending request (the run then finishes) and cancels a run', async () => {
    const writeDone = { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }
    const world = natsWorld()
    const mock = await startMock([writeDone, writeDone])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = (name: string) =>
      writeTask(
        dir,
        {
          goal: 'Write DONE into out.txt',
          workspace: name,
          providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
          verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
          approval: 'defer'
        },
        `${name}.json`
      )
    const first = lastJson<{ runId: string; status: string }>(await runCli(['run', task('one'), '--json', '--db', db]))
    const second = lastJson<{ runId: string; status: string }>(await runCli(['run', task('two'), '--json', '--db', db]))
    expect([first.status, second.status]).toEqual(['awaiting_approval', 'awaiting_approval'])
    await world.serving(db)
    nc = await world.connect()

    const status = await ask(`agentvisor.control.${first.runId}.status`, { v: 1 })
    expect(status).toMatchObject({ v: 1, ok: true, id: first.runId, status: 'awaiting_approval', goal: 'Write DONE into out.txt', parentId: null })

    const approved = await ask(`agentvisor.control.${first.runId}.approve`, { v: 1, decision: 'approve' })
    expect(approved).toMatchObject({ v: 1, ok: true })
    await waitFor(
      async () => ((await ask(`agentvisor.control.${first.runId}.status`, { v: 1 }))['status'] === 'succeeded' ? true : undefined),
      'the approved run to finish'
    )
    expect(readFileSync(path.join(dir, 'one', 'out.txt'), 'utf8')).toBe('DONE')

    const cancelled = await ask(`agentvisor.control.${second.runId}.cancel`, { v: 1 })
    expect(cancelled).toMatchObject({ v: 1, ok: true })
    await waitFor(
      async () => ((await ask(`agentvisor.control.${second.runId}.status`, { v: 1 }))['status'] === 'cancelled' ? true : undefined),
      'the cancelled run'
    )
    expect(existsSync(path.join(dir, 'two', 'out.txt'))).toBe(false)
  })

  it('does the same through the TypeScript client, watching the run to its end', async () => {
    const writeDone = { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }
    const world = natsWorld()
    const mock = await startMock([writeDone])
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const task = writeTask(dir, {
      goal: 'Write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      approval: 'defer'
    })
    const { runId } = lastJson<{ runId: string }>(await runCli(['run', task, '--json', '--db', db]))
    await world.serving(db)
    const client = await AgentvisorClient.connect({ servers: world.url })
    try {
      expect(await client.status(runId)).toMatchObject({ id: runId, status: 'awaiting_approval' })
      const events: string[] = []
      const stop = await client.watch(runId, (e) => events.push(`${e.from}>${e.to}`))
      const done = client.done(runId, 20_000)
      expect(await client.approve(runId, { decision: 'approve' })).toHaveLength(1)
      expect(await done).toMatchObject({ v: 1, runId, status: 'succeeded', steps: 1 })
      expect(events).toContain('verifying>finished.succeeded')
      await stop()
      await expect(client.approve(runId, { decision: 'approve' })).rejects.toMatchObject({ _tag: 'ControlRefusedError' })
    } finally {
      await client.close()
    }
  })

  it('answers malformed payloads, unknown fields and invalid run ids with ok:false and keeps serving', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const world = natsWorld()
    const [worker] = await world.serving(db)
    nc = await world.connect()
    expect(await ask('agentvisor.control.some-run.approve', '{not json')).toMatchObject({ ok: false, error: 'payload is not JSON' })
    expect(await ask('agentvisor.control.some-run.approve', { v: 1, decision: 'maybe' })).toMatchObject({ ok: false })
    expect(await ask('agentvisor.control.some-run.status', { v: 2 })).toMatchObject({ ok: false })
    expect(await ask('agentvisor.control.some-run.explode', { v: 1 })).toMatchObject({ ok: false })
    expect(await ask('agentvisor.control.some-run.approve', { v: 1, decision: 'approve', remeber: true })).toEqual({
      v: 1,
      ok: false,
      error: 'remeber: is not a known field'
    })
    expect(await ask('agentvisor.control.some-run.cancel', { v: 1, force: true })).toEqual({ v: 1, ok: false, error: 'force: is not a known field' })
    nc.publish('agentvisor.runs.start', new TextEncoder().encode('garbage'))
    expect(await ask('agentvisor.control.no-such-run.status', { v: 1 })).toEqual({ v: 1, ok: false, error: 'no run with id no-such-run' })
    const idRule = 'is not valid: expected 1 to 64 letters, digits, "_" or "-"'
    expect(await ask(`agentvisor.control.${'r'.repeat(65)}.status`, { v: 1 })).toEqual({ v: 1, ok: false, error: `run id "${'r'.repeat(65)}" ${idRule}` })
    expect(await ask('agentvisor.control.run%2F~%24x.cancel', { v: 1 })).toEqual({ v: 1, ok: false, error: `run id "run%2F~%24x" ${idRule}` })
    expect(worker!.child.exitCode).toBeNull()
    expect(worker!.log()).not.toMatch(/internal error|TypeError|\n\s+at /)
  })
})
