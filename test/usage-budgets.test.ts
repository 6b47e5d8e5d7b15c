import { type MockLlm, startMockLlm } from '@agentvisor/cli'
import { afterEach, describe, expect, it } from 'vitest'
import { lastJson, runCli, taskInTempDir } from './support/cli.js'

// Usage and budgets (docs/task-file.md, "Usage and budgets") over the mock LLM: every figure is
// checked against what the mock reported, every budget against the requests it received.

const LEAD = 'lead-model'
const WORKER = 'worker-model'

let mock: MockLlm | undefined
afterEach(async () => {
  await mock?.close()
  mock = undefined
})

const start = async (models: Record<string, unknown[]>): Promise<string> => {
  mock = await startMockLlm({ scenarios: { models } as never, port: 0 })
  return mock.url
}

interface Usage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUsd?: number
}

/** What the mock reported for every request it answered of `model` (the scripts give each step's usage). */
const reported = (steps: ReadonlyArray<{ readonly usage: { inputTokens: number; outputTokens: number } }>, answered: number) => {
  let inputTokens = 0
  let outputTokens = 0
  for (const step of steps.slice(0, answered)) {
    inputTokens += step.usage.inputTokens
    outputTokens += step.usage.outputTokens
  }
  return { inputTokens, outputTokens }
}

const requestsOf = (model: string): number => mock!.requests.filter((r) => r.model === model).length

describe('usage', () => {
  const steps = [
    { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DO' } }], usage: { inputTokens: 1200, outputTokens: 40 } },
    { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }], usage: { inputTokens: 1500, outputTokens: 35 } }
  ]
  const pricing = { [LEAD]: { inputPerMTok: 3, outputPerMTok: 15 } }
  const cost = (u: { inputTokens: number; outputTokens: number }) => (u.inputTokens * 3 + u.outputTokens * 15) / 1_000_000

  it('totals what the provider reported, priced by `pricing`, in run --json, show --json and runs --json', async () => {
    const baseUrl = await start({ [LEAD]: steps })
    const { dir, db, task } = taskInTempDir({
      goal: 'Write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl, model: LEAD }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      pricing,
      approval: 'auto'
    })
    const ran = await runCli(['run', task, '--json', '--db', db], { cwd: dir })
    expect(ran.code).toBe(0)
    const result = lastJson<{ runId: string; usage: Usage; treeUsage?: Usage }>(ran)
    const expected = reported(steps, 2)
    expect(requestsOf(LEAD)).toBe(2)
    expect(result.usage).toEqual({ ...expected, costUsd: Number(cost(expected).toFixed(9)) })
    expect(result.treeUsage).toBeUndefined()
    expect(ran.stderr).toContain(`used ${(expected.inputTokens + expected.outputTokens).toLocaleString('en-US')} tokens`)

    const shown = lastJson<{ run: { usage: Usage } }>(await runCli(['show', result.runId, '--json', '--db', db]))
    expect(shown.run.usage).toEqual(result.usage)
    const listed = JSON.parse((await runCli(['runs', '--json', '--db', db])).stdout) as Array<{ id: string; usage: Usage }>
    expect(listed.find((row) => row.id === result.runId)?.usage).toEqual(result.usage)
  })

  it('keeps counting across a pause and a resume: the paused row shows what was spent so far', async () => {
    const baseUrl = await start({ [LEAD]: steps })
    const { dir, db, task } = taskInTempDir({
      goal: 'Write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl, model: LEAD }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      pricing,
      approval: 'defer'
    })
    const paused = await runCli(['run', task, '--json', '--db', db], { cwd: dir })
    expect(paused.code).toBe(3)
    const first = lastJson<{ runId: string; usage: Usage }>(paused)
    expect(first.usage).toEqual({ ...reported(steps, 1), costUsd: Number(cost(reported(steps, 1)).toFixed(9)) })
    const listed = JSON.parse((await runCli(['runs', '--json', '--db', db])).stdout) as Array<{ id: string; usage: Usage }>
    expect(listed[0]?.usage).toEqual(first.usage)

    // Approve each write as it comes, until the run finishes.
    let last = first
    for (let round = 0; round < 2; round++) {
      expect((await runCli(['approve', first.runId, '--db', db])).code).toBe(0)
      const resumed = await runCli(['resume', first.runId, '--json', '--db', db], { cwd: dir })
      last = lastJson<{ runId: string; usage: Usage }>(resumed)
      if (resumed.code === 0) break
      expect(resumed.code).toBe(3)
    }
    expect(requestsOf(LEAD)).toBe(2)
    const expected = reported(steps, 2)
    expect(last.usage).toEqual({ ...expected, costUsd: Number(cost(expected).toFixed(9)) })
  })
})

describe('budgets', () => {
  it('stops a tree of 8 parallel children before the calls that would pass maxTokens', async () => {
    // The lead starts eight children at once; each child answers in one call of 60 tokens, well
    // within what it reserves (its prompt and model.maxTokens of 100), so reservations bound the spend.
    const childStep = { text: 'found it', usage: { inputTokens: 50, outputTokens: 10 } }
    const baseUrl = await start({
      [LEAD]: [
        {
          toolCalls: Array.from({ length: 8 }, (_, i) => ({ name: 'spawn_child', arguments: { goal: `Look into part ${i + 1}`, agent: 'worker' } })),
          usage: { inputTokens: 400, outputTokens: 80 }
        },
        { text: 'all done', usage: { inputTokens: 600, outputTokens: 10 } }
      ],
      [WORKER]: Array.from({ length: 8 }, () => childStep)
    })
    // A child's call reserves 159 tokens (its prompt and 100): with 480 spent by the lead, at least one
    // child fits, and eight cannot however their calls interleave (480 + 7 x 60 + 159 > 850).
    const maxTokens = 850
    const { dir, db, task } = taskInTempDir({
      goal: 'Look into eight parts at once',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl, model: LEAD }],
      tools: ['spawn_child'],
      delegates: ['worker'],
      agents: {
        worker: { description: 'looks one part up', providers: [{ name: 'w', kind: 'openai', baseUrl, model: WORKER }], model: { maxTokens: 100 }, tools: [] }
      },
      model: { maxTokens: 100 },
      limits: { maxTokens, maxSteps: 3 },
      children: { maxChildren: 8, maxConcurrent: 8 },
      approval: 'auto'
    })
    const ran = await runCli(['run', task, '--json', '--db', db], { cwd: dir })
    const result = lastJson<{ runId: string; status: string; error?: { kind: string; message: string }; treeUsage?: Usage }>(ran)
    const childCalls = requestsOf(WORKER)
    // Some children ran, not all: the others were refused before their call was sent.
    expect(childCalls).toBeGreaterThan(0)
    expect(childCalls).toBeLessThan(8)
    const spent = 480 + childCalls * 60 + (requestsOf(LEAD) > 1 ? 610 : 0)
    expect(spent).toBeLessThanOrEqual(maxTokens)
    expect(result.status).toBe('failed')
    expect(result.error?.kind).toBe('budget')
    // The tree's usage is exactly what the mock reported for the calls it answered.
    expect(result.treeUsage).toEqual({
      inputTokens: 400 + childCalls * 50 + (requestsOf(LEAD) > 1 ? 600 : 0),
      outputTokens: 80 + childCalls * 10 + (requestsOf(LEAD) > 1 ? 10 : 0)
    })
    const shown = lastJson<{ children: Array<{ id: string; status: string }> }>(await runCli(['show', result.runId, '--json', '--db', db]))
    expect(shown.children).toHaveLength(8)
    const refused = shown.children.filter((c) => c.status === 'failed')
    expect(refused).toHaveLength(8 - childCalls)
    for (const child of refused) {
      const trace = lastJson<{ run: { error?: { kind: string } }; receipts: unknown[] }>(await runCli(['show', child.id, '--json', '--db', db]))
      expect(trace.run.error?.kind).toBe('budget')
      expect(trace.receipts).toEqual([])
    }
  })

  it('does not send the call that could pass maxCostUsd', async () => {
    const baseUrl = await start({
      [LEAD]: [
        { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DO' } }], usage: { inputTokens: 1000, outputTokens: 500 } },
        { text: 'done', usage: { inputTokens: 1000, outputTokens: 5 } }
      ]
    })
    const { dir, db, task } = taskInTempDir({
      goal: 'Write DONE into out.txt',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl, model: LEAD }],
      // $0.006 for the first call; the second reserves 1,000 answer tokens at $10/MTok ($0.01) and its prompt.
      pricing: { [LEAD]: { inputPerMTok: 1, outputPerMTok: 10 } },
      model: { maxTokens: 1000 },
      limits: { maxCostUsd: 0.015 },
      approval: 'auto'
    })
    const ran = await runCli(['run', task, '--json', '--db', db], { cwd: dir })
    expect(ran.code).toBe(1)
    const result = lastJson<{ status: string; error?: { kind: string; message: string }; usage: Usage }>(ran)
    expect(requestsOf(LEAD)).toBe(1)
    expect(result.status).toBe('failed')
    expect(result.error?.kind).toBe('budget')
    expect(result.error?.message).toContain('dollar budget of 0.015')
    expect(result.usage).toEqual({ inputTokens: 1000, outputTokens: 500, costUsd: 0.006 })
  })

  it('refuses maxCostUsd when a provider model has no price: exit 2 naming pricing', async () => {
    const { dir, db, task } = taskInTempDir({
      goal: 'g',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'priced' }],
      agents: { helper: { description: 'h', providers: [{ name: 'q', kind: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'unpriced' }] } },
      pricing: { priced: { inputPerMTok: 1, outputPerMTok: 2 } },
      limits: { maxCostUsd: 1 }
    })
    const ran = await runCli(['run', task, '--json', '--db', db], { cwd: dir })
    expect(ran.code).toBe(2)
    expect(lastJson<{ error: { message: string } }>(ran).error.message).toMatch(/pricing: has no entry for model "unpriced" of provider "q"/)
  })
})
