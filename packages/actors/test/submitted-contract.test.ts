import { parseTaskContract, type TaskContract } from '@agentvisor/core'
import { Either, Option } from 'effect'
import { describe, expect, it } from 'vitest'
import { narrowSubmission } from '../src/submit/submitted-contract.js'

const template: TaskContract = Either.getOrThrow(
  parseTaskContract(
    {
      goal: 'the template goal, replaced by each submission',
      workspace: '/srv/agentvisor/team',
      providers: [{ name: 'p', kind: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm', apiKeyEnv: 'OPENAI_KEY' }],
      limits: { maxSteps: 6, maxRetries: 1, dispatchCeiling: 20, timeoutMs: 60_000, maxTokens: 50_000 },
      policy: { layers: [{ name: 'team', allow: { write: ['reports/**'], exec: ['npm test'] }, ask: { exec: ['git *'] } }] },
      approval: 'prompt',
      tools: ['read_file', 'write_file', 'list_*'],
      children: { maxChildren: 3, maxDepth: 2, maxConcurrent: 2 }
    },
    '/'
  )
)

const refusal = (submission: unknown): string => Either.match(narrowSubmission(template, submission), { onLeft: (reason) => reason, onRight: () => 'accepted' })

describe('a submitted run laid over the worker template', () => {
  it("takes the goal and everything left out from the template, in a worker's approval mode", () => {
    const run = Either.getOrThrow(narrowSubmission(template, { goal: 'Write the weekly report' }))

    expect(run).toEqual({ ...template, goal: 'Write the weekly report', approval: 'defer' })
  })

  it('narrows workspace, limits, children and tools, adds ask and deny layers, and sets what only shapes the answer', () => {
    const run = Either.getOrThrow(
      narrowSubmission(template, {
        goal: 'Write the weekly report',
        workspace: 'weekly',
        limits: { maxSteps: 3 },
        children: { maxChildren: 1 },
        tools: ['read_file', 'list_dir'],
        policy: { layers: [{ name: 'no-drafts', deny: { write: ['reports/drafts/**'] } }] },
        instructions: 'Be brief.',
        verify: { command: { run: 'npm test' } },
        output: { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'] }
      })
    )

    expect(run.workspace).toBe('/srv/agentvisor/team/weekly')
    expect(run.limits).toEqual({ ...template.limits, maxSteps: 3 })
    expect(run.children).toEqual({ maxChildren: 1, maxDepth: 2, maxConcurrent: 2 })
    expect(run.tools).toEqual(['read_file', 'list_dir'])
    expect(run.policy.layers.map((layer) => layer.name)).toEqual(['team', 'no-drafts'])
    expect(run.instructions).toBe('Be brief.')
    expect(run.providers).toEqual(template.providers)
  })

  it('refuses anything wider than the template, naming the field', () => {
    expect(refusal({ goal: 'g', workspace: '../elsewhere' })).toBe(
      "workspace: /srv/agentvisor/elsewhere is not inside the worker's submit template's workspace /srv/agentvisor/team"
    )
    expect(refusal({ goal: 'g', workspace: '/etc' })).toMatch(/^workspace: \/etc is not inside/)
    expect(refusal({ goal: 'g', limits: { maxSteps: 50 } })).toBe("limits.maxSteps: 50 is above the worker's submit template's 6")
    expect(refusal({ goal: 'g', limits: { stall: { window: 4 } } })).toBe('accepted')
    const watchedTemplate = { ...template, limits: { ...template.limits, stall: { window: 6, repeats: 3 } } }
    expect(Either.getLeft(narrowSubmission(watchedTemplate, { goal: 'g', limits: { stall: { window: 60 } } }))).toEqual(
      Option.some('limits.stall: {"repeats":3,"window":60} differs from the worker\'s submit template\'s {"repeats":3,"window":6}')
    )
    expect(refusal({ goal: 'g', children: { maxDepth: 5 } })).toBe("children.maxDepth: 5 is above the worker's submit template's 2")
    expect(refusal({ goal: 'g', approval: 'auto' })).toBe('approval: "auto" is weaker than the worker\'s submit template\'s "prompt"')
    expect(refusal({ goal: 'g', policy: { layers: [{ name: 'mine', allow: { write: ['**'] } }] } })).toBe(
      "policy.layers.0.allow: a submitted run may only add ask and deny rules to the worker's submit template's policy"
    )
    expect(refusal({ goal: 'g', providers: [{ name: 'q', kind: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'big' }] })).toMatch(/^providers: /)
    expect(refusal({ goal: 'g', pricing: { m: { inputPerMTok: 0, outputPerMTok: 0 } } })).toMatch(/^pricing: differs/)
    expect(refusal({ goal: 'g', sandbox: { exec: 'bwrap', network: true } })).toMatch(/^sandbox: differs/)
    expect(refusal({ goal: 'g', tools: ['exec'] })).toBe(`tools.0: "exec" is not among the worker's submit template's tools`)
    expect(refusal({ goal: 'g', tools: ['*'] })).toMatch(/^tools\.0: "\*" is a pattern/)
    expect(refusal({ goal: 'g', delegates: ['researcher'] })).toMatch(/delegates|researcher/)
    expect(refusal({ goal: 'g', verify: { command: { run: 'rm -rf reports' } } })).toMatch(/^verify: the command /)
  })

  it('validates the task as a task file, and never takes what only agentvisor sets', () => {
    expect(refusal({ goal: 'g', limits: { maxSteps: 'many' } })).toMatch(/^limits\.maxSteps/)
    expect(refusal({ workspace: 'x' })).toMatch(/goal/)
    expect(refusal({ goal: 'g', lineage: { rootId: 'r', parentId: 'r', depth: 1, treeDispatchCeiling: 99 } })).toMatch(/^lineage: is set by agentvisor/)
    expect(refusal({ goal: 'g', agent: 'anyone' })).toMatch(/^agent: is set by agentvisor/)
    expect(refusal(['not', 'a', 'task'])).toBe('contract: must be a task (a JSON object)')
  })
})
