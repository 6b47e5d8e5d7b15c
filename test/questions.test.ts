import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import * as path from 'node:path'
import { Agentvisor, AgentvisorClient, type RunStreamEvent } from '@agentvisor/actors'
import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { startInspector } from '../packages/cli/src/inspector/server.js'
import { waitForLeaseHolderGone } from './support/processes.js'
import { BIN, lastJson, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { inspectorFetch, inspectorPost } from './support/inspector.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { natsWorldPerTest } from './support/nats.js'

// Questions (docs/policy.md, "Questions"): a model asks a person with ask_human, the run pauses
// (awaiting_input, exit 3), anyone answers from another process, and the run goes on with the
// answer as the call's result, over the CLI, the TS API and raw NATS.

const QUESTION = 'Which bucket should the export go to?'
const ANSWER = 'The staging bucket, please.'

const startMock = mockLlmPerTest()
// The default subjects: what a service in another language talks to.
const natsWorld = natsWorldPerTest({ defaultSubjects: true })
let mock: MockLlm | undefined

const script = [
  { text: 'I need to know one thing first.', toolCalls: [{ name: 'ask_human', arguments: { question: QUESTION } }] },
  { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'staging' } }] },
  { text: 'Exported to staging.' }
]

const task = (dir: string, baseUrl: string, approval = 'defer') =>
  writeTask(dir, {
    goal: 'Export the report where the person says',
    workspace: 'ws',
    providers: [{ name: 'p', kind: 'openai', baseUrl, model: 'm' }],
    tools: ['ask_human', 'write_file'],
    verify: { fileContains: { path: 'out.txt', text: 'staging' } },
    policy: { layers: [{ name: 'team', allow: { write: ['out.txt'] } }] },
    approval
  })

interface Body {
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content?: string | null; readonly tool_call_id?: string }>
  readonly tools?: ReadonlyArray<{ readonly function: { readonly name: string } }>
}
const toolAnswers = (request: number): string[] =>
  ((mock!.requests[request]?.body as Body | undefined)?.messages ?? []).filter((m) => m.role === 'tool').map((m) => m.content ?? '')

describe('questions', () => {
  it('pauses with exit 3 on ask_human, takes the answer from another process, and resumes with it as the result', async () => {
    mock = await startMock(script)
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const ran = await runCli(['run', task(dir, mock.url), '--json', '--db', db])
    expect(ran.code, ran.stderr).toBe(3)
    expect(ran.stderr).toContain(`the model asks: ${QUESTION}`)
    const { runId, status } = lastJson<{ runId: string; status: string }>(ran)
    expect(status).toBe('awaiting_input')
    // Offered because the agent's tools name it.
    expect(((mock.requests[0]!.body as Body).tools ?? []).map((t) => t.function.name)).toEqual(['write_file', 'ask_human'])
    const listed = JSON.parse((await runCli(['runs', '--json', '--status', 'awaiting_input', '--db', db])).stdout) as Array<{ id: string }>
    expect(listed.map((r) => r.id)).toEqual([runId])
    // approve is not how a question is answered.
    expect((await runCli(['approve', runId, '--db', db])).code).toBe(2)

    const answered = await runCli(['answer', runId, ANSWER, '--db', db])
    expect(answered.code, answered.stderr).toBe(0)
    expect((await runCli(['answer', runId, 'again', '--db', db])).code).toBe(2)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toMatchObject({ runId, status: 'succeeded' })
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('staging')
    // The model's next request carries the answer as the call's result; nothing was asked twice
    // (the write passes verification: two requests in all).
    expect(mock.requests).toHaveLength(2)
    expect(toolAnswers(1)).toEqual([ANSWER])

    const trace = lastJson<{ approvals: Array<{ kind?: string; status: string; target: string }>; transitions: Array<{ to: string }> }>(
      await runCli(['show', runId, '--json', '--db', db])
    )
    expect(trace.transitions.map((t) => t.to)).toContain('awaitingInput')
    expect(trace.approvals).toEqual([expect.objectContaining({ kind: 'input', status: 'approved', target: QUESTION })])
    const events = (await runCli(['watch', runId, '--json', '--db', db])).stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as RunStreamEvent)
    expect(events.filter((e) => e.kind === 'inputRequested')).toEqual([
      expect.objectContaining({ request: expect.objectContaining({ kind: 'input', question: QUESTION }) })
    ])
  })

  it('never answers a question by itself under approval: auto', async () => {
    mock = await startMock(script)
    const dir = tempDir()
    const ran = await runCli(['run', task(dir, mock.url, 'auto'), '--json', '--db', path.join(dir, 'av.db')])
    expect(ran.code, ran.stderr).toBe(3)
    expect(lastJson(ran)).toMatchObject({ status: 'awaiting_input' })
    expect(mock.requests).toHaveLength(1)
  })

  it('is answered through the TypeScript API: pending lists the question, answer records it', async () => {
    mock = await startMock(script)
    const dir = tempDir()
    const av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    try {
      const first = await av.run({ ...JSON.parse(readFileSync(task(dir, mock.url), 'utf8')), workspace: path.join(dir, 'ws') })
      expect(first.status).toBe('awaiting_input')
      expect(await av.pending(first.runId)).toEqual([{ id: expect.any(String), kind: 'input', step: 1, question: QUESTION }])
      await av.answer(first.runId, ANSWER)
      await expect(av.answer(first.runId, 'twice')).rejects.toMatchObject({ _tag: 'NothingPendingError' })
      const resumed = await (await av.resume(first.runId)).result
      expect(resumed.status).toBe('succeeded')
      expect(toolAnswers(1)).toEqual([ANSWER])
    } finally {
      await av.close()
    }
  })

  it('is answered over raw NATS: pending, then answer; a worker drives the run on', async () => {
    mock = await startMock(script)
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const { runId } = lastJson<{ runId: string }>(await runCli(['run', task(dir, mock.url), '--json', '--db', db]))
    const world = natsWorld()
    await world.serving(db)
    const nc = await world.connect()
    const ask = async (verb: string, payload: object): Promise<Record<string, unknown>> => {
      const reply = await nc.request(`agentvisor.control.${runId}.${verb}`, new TextEncoder().encode(JSON.stringify(payload)), { timeout: 60_000 })
      return JSON.parse(new TextDecoder().decode(reply.data)) as Record<string, unknown>
    }
    const pending = await ask('pending', { v: 1 })
    expect(pending).toMatchObject({ v: 1, ok: true, requests: [{ kind: 'input', step: 1, question: QUESTION }] })
    expect(await ask('answer', { v: 1, text: '' })).toMatchObject({ v: 1, ok: false, error: expect.stringContaining('text') })
    // The TS client says the same: the question, then a refusal of an unknown one.
    const client = await AgentvisorClient.connect({ servers: world.url })
    try {
      expect(await client.pending(runId)).toEqual([expect.objectContaining({ kind: 'input', question: QUESTION })])
      await expect(client.answer(runId, ANSWER, { requestId: 'nope' })).rejects.toThrow(/has no request nope/)
    } finally {
      await client.close()
    }
    expect(await ask('answer', { v: 1, text: ANSWER })).toMatchObject({ v: 1, ok: true })
    await waitFor(async () => ((await ask('status', { v: 1 }))['status'] === 'succeeded' ? true : undefined), 'the answered run to finish')
    expect(toolAnswers(1)).toEqual([ANSWER])
  })

  it('asks on the terminal under approval: prompt, and keeps the question pending when the process is killed there', async () => {
    mock = await startMock(script)
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const file = task(dir, mock.url, 'prompt')
    // `script` gives the CLI a real terminal, so it asks instead of pausing.
    const child = spawn('script', ['-qfec', `${process.execPath} ${BIN} run ${file} --db ${db}`, '/dev/null'], {
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe']
    })
    let screen = ''
    child.stdout.on('data', (d: Buffer) => (screen += d.toString()))
    const exited = new Promise((r) => child.once('exit', r))
    await waitFor(() => (screen.includes('your answer') ? true : undefined), 'the question on the terminal')
    expect(screen).toContain(`the model asks: ${QUESTION}`)
    process.kill(-child.pid!, 'SIGKILL')
    await exited
    const runId = /run (\S+) started/.exec(screen)![1]!
    await waitForLeaseHolderGone(db, runId)
    const trace = lastJson<{ run: { status: string }; approvals: Array<{ kind?: string; status: string }> }>(
      await runCli(['show', runId, '--json', '--db', db])
    )
    expect(trace.run.status).toBe('awaiting_input')
    expect(trace.approvals).toEqual([expect.objectContaining({ kind: 'input', status: 'pending' })])
    expect((await runCli(['answer', runId, ANSWER, '--db', db])).code).toBe(0)
    const resumed = await runCli(['resume', runId, '--json', '--db', db])
    expect(lastJson(resumed)).toMatchObject({ status: 'succeeded' })
    expect(toolAnswers(1)).toEqual([ANSWER])
  })

  it('is answered in the inspector: the answer is recorded and the paused run driven on to its end', async () => {
    mock = await startMock(script)
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const { runId } = lastJson<{ runId: string }>(await runCli(['run', task(dir, mock.url), '--json', '--db', db]))
    const inspector = await startInspector({ db, port: 0 })
    try {
      const view = (await (await inspectorFetch(inspector, `/api/runs/${runId}`)).json()) as { approvals: Array<{ id: string; kind?: string; target: string }> }
      expect(view.approvals).toEqual([expect.objectContaining({ kind: 'input', target: QUESTION })])
      const post = (body: string) => inspectorPost(inspector, `/api/runs/${runId}/answers/${view.approvals[0]!.id}`, body)
      expect((await post('{"text":"  "}')).status).toBe(400)
      const answered = await post(JSON.stringify({ text: ANSWER }))
      expect(await answered.json()).toMatchObject({ resumed: true, pending: 0 })
      expect((await post(JSON.stringify({ text: 'again' }))).status).toBe(409)
      await waitFor(async () => {
        const now = (await (await inspectorFetch(inspector, `/api/runs/${runId}`)).json()) as { run: { status: string } }
        return now.run.status === 'succeeded' ? true : undefined
      }, 'the answered run to finish')
      expect(toolAnswers(1)).toEqual([ANSWER])
    } finally {
      await inspector.close()
    }
  })
})
