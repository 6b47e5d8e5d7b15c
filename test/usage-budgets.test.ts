import type { MockLlm } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, taskInTempDir, writeTask } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { storedTrace } from './support/stored-trace.js'

// Usage and budgets (docs/task-file.md, "Usage and budgets") over the mock LLM: every figure is
// checked against what the mock reported, every budget against the requests it received.

const LEAD = 'lead-model'
const WORKER = 'worker-model'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const start = async (models: Record<string, unknown[]>): Promise<string> => {
  mock = await startMock.scenarios({ models })
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

    const shown = await storedTrace<{ run: { usage: Usage } }>(db, result.runId)
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
    const shown = await storedTrace<{ children: Array<{ id: string; status: string }> }>(db, result.runId)
    expect(shown.children).toHaveLength(8)
    const refused = shown.children.filter((c) => c.status === 'failed')
    expect(refused).toHaveLength(8 - childCalls)
    const traces = await Promise.all(
      refused.map((child) => storedTrace<{ run: { error?: { kind: string; message: string } }; receipts: unknown[] }>(db, child.id))
    )
    for (const trace of traces) {
      expect(trace.run.error?.kind).toBe('budget')
      // The tree's bound, set by the root; the allowance the delegate's agent sets.
      expect(trace.run.error?.message).toMatch(
        /^token budget of 850 \(limits\.maxTokens of the tree's root\) for the run tree: \d+ spent(, \d+ reserved by \d+ calls? of the tree in flight)?, and the next call reserves \d+ \(prompt estimate \d+ tokens \+ answer allowance 100 tokens from agents\.worker\.model\.maxTokens\); lower agents\.worker\.model\.maxTokens or raise limits\.maxTokens of the tree's root$/
      )
      expect(trace.receipts).toEqual([])
    }
    // Nine runs and their shows through the CLI on a shared host: generous, never the verdict.
  }, 120_000)

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
    // $0.006 spent; the next call reserves its prompt at $1/MTok and 1,000 answer tokens at $10/MTok.
    const found =
      /^dollar budget of \$0\.015 \(limits\.maxCostUsd\) for the run: \$0\.006 spent, and the next call may cost \$([\d.]+) \(prompt estimate (\d+) tokens \+ answer allowance 1000 tokens from model\.maxTokens, at its model's pricing\); lower model\.maxTokens or raise limits\.maxCostUsd$/.exec(
        result.error?.message ?? ''
      )
    expect(found, result.error?.message).not.toBeNull()
    expect(Number(found![1])).toBeCloseTo((Number(found![2]) * 1 + 1000 * 10) / 1e6, 12)
    expect(result.usage).toEqual({ inputTokens: 1000, outputTokens: 500, costUsd: 0.006 })
  })

  it('refuses a call at step 0 naming what its reservation is made of, and a lower model.maxTokens lets the same run go', async () => {
    const baseUrl = await start({ [LEAD]: [{ text: 'done', usage: { inputTokens: 300, outputTokens: 4 } }] })
    const base = {
      goal: 'Say done',
      workspace: 'ws',
      providers: [{ name: 'p', kind: 'openai', baseUrl, model: LEAD }],
      limits: { maxTokens: 2000 },
      approval: 'auto'
    }
    const { dir, db } = taskInTempDir(base)
    const refusal = async (model: Record<string, unknown> | undefined, name: string) => {
      const ran = await runCli(['run', writeTask(dir, model === undefined ? base : { ...base, model }, name), '--json', '--db', db], { cwd: dir })
      expect(ran.code).toBe(1)
      const result = lastJson<{ runId: string; status: string; steps: number; error?: { kind: string; message: string } }>(ran)
      expect(result).toMatchObject({ status: 'failed', steps: 0, error: { kind: 'budget' } })
      const shown = await storedTrace<{ run: { error?: { message: string } } }>(db, result.runId)
      expect(shown.run.error?.message).toBe(result.error?.message)
      return result.error!.message
    }
    const parts = (message: string) => {
      const found =
        /^token budget of 2000 \(limits\.maxTokens\) for the run: 0 spent, and the next call reserves (\d+) \(prompt estimate (\d+) tokens \+ answer allowance (\d+) tokens from model\.maxTokens( \(unset: the default 4096\))?\); lower model\.maxTokens or raise limits\.maxTokens$/.exec(
          message
        )
      expect(found, message).not.toBeNull()
      return { reserves: Number(found![1]), prompt: Number(found![2]), answer: Number(found![3]), unset: found![4] !== undefined }
    }
    // Unset: the default answer allowance; set higher than the room: the setting's.
    const unset = parts(await refusal(undefined, 'default.json'))
    expect(unset).toMatchObject({ answer: 4096, unset: true, reserves: unset.prompt + 4096 })
    const high = parts(await refusal({ maxTokens: 3000 }, 'high.json'))
    expect(high).toMatchObject({ answer: 3000, unset: false, prompt: unset.prompt, reserves: unset.prompt + 3000 })
    expect(requestsOf(LEAD)).toBe(0)

    // The same run with a lower allowance goes, and the prompt the model got is the one estimated.
    const ran = await runCli(['run', writeTask(dir, { ...base, model: { maxTokens: 256 } }, 'low.json'), '--json', '--db', db], { cwd: dir })
    expect(ran.code, ran.stderr).toBe(0)
    expect(lastJson<{ status: string }>(ran).status).toBe('succeeded')
    expect(mock!.requests).toHaveLength(1)
    const body = mock!.requests[0]!.body as {
      max_tokens?: number
      messages: Array<{ content: string }>
      tools: Array<{ function: unknown }>
    }
    expect(body.max_tokens).toBe(256)
    const characters = body.messages.reduce((sum, m) => sum + m.content.length, 0) + JSON.stringify(body.tools.map((t) => t.function)).length
    expect(unset.prompt).toBe(Math.ceil(characters / 4))
  }, 120_000)

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
