import { Either } from 'effect'
import { describe, expect, it } from 'vitest'
import { compileJsonSchema, describeViolations, parseChildContract, parseTaskContract } from '@agentvisor/core'

const primary = { name: 'primary', kind: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'gpt-4o-mini' } as const
const task = {
  goal: 'Triage ticket T-42 and write the summary to triage.md',
  workspace: 'ws',
  providers: [primary],
  instructions: 'You lead a small support team.',
  model: { temperature: 0.2, maxTokens: 2048 },
  tools: ['read_file', 'write_file', 'spawn_child'],
  delegates: ['researcher'],
  agents: {
    researcher: {
      description: 'Looks tickets and docs up',
      instructions: 'Answer only from the tools.',
      tools: ['lookup_ticket', 'docs__*'],
      output: { type: 'object', properties: { facts: { type: 'array', items: { type: 'string' } } }, required: ['facts'] },
      limits: { maxSteps: 6 }
    }
  },
  toolModules: ['./tools.mjs'],
  output: { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'] }
}

const errorOf = (input: unknown) => {
  const result = parseTaskContract(input, '/base')
  if (Either.isRight(result)) throw new Error('expected a validation error')
  return result.left
}

describe('agents in a task', () => {
  it("keeps the root agent's fields, fills each agent's providers from the task's and resolves tool modules against the task's folder", () => {
    const contract = Either.getOrThrow(parseTaskContract(task, '/base'))
    expect(contract.instructions).toBe('You lead a small support team.')
    expect(contract.model).toEqual({ temperature: 0.2, maxTokens: 2048 })
    expect(contract.tools).toEqual(['read_file', 'write_file', 'spawn_child'])
    expect(contract.delegates).toEqual(['researcher'])
    expect(contract.output).toEqual(task.output)
    expect(contract.toolModules).toEqual(['/base/tools.mjs'])
    expect(contract.agents?.['researcher']?.providers).toEqual([primary])
    expect(contract.agents?.['researcher']?.limits).toEqual({ maxSteps: 6 })
    expect(contract.agent).toBeUndefined()
  })

  it('leaves a first-edition task without any agent field', () => {
    const { instructions, model, tools, delegates, agents, toolModules, output, ...plain } = task
    const contract = Either.getOrThrow(parseTaskContract(plain, '/base'))
    for (const field of ['agent', 'instructions', 'model', 'tools', 'delegates', 'output', 'agents', 'toolModules']) expect(contract).not.toHaveProperty(field)
  })

  it('refuses a delegate that names no agent of the task, naming the field and the agents there are', () => {
    expect(errorOf({ ...task, delegates: ['researcher', 'writer'] }).message).toBe('delegates.1: unknown agent "writer" (the task\'s agents are researcher)')
    const nested = { ...task, agents: { researcher: { ...task.agents.researcher, delegates: ['ghost'] } } }
    expect(errorOf(nested)).toMatchObject({ field: 'agents.researcher.delegates.0', message: expect.stringContaining('unknown agent "ghost"') })
  })

  it('refuses an output schema that is not an object schema or does not compile, naming the field', () => {
    expect(errorOf({ ...task, output: { type: 'string' } }).message).toContain('output: must be a JSON Schema of "type": "object"')
    const bad = { ...task, agents: { researcher: { ...task.agents.researcher, output: { type: 'object', properties: { facts: { type: 'nope' } } } } } }
    expect(errorOf(bad).message).toMatch(/^agents\.researcher\.output: is not a valid JSON Schema/)
  })

  it('refuses model settings out of range and unknown agent fields', () => {
    expect(errorOf({ ...task, model: { temperature: 3 } }).message).toMatch(/^model\.temperature: /)
    expect(errorOf({ ...task, agents: { researcher: { ...task.agents.researcher, temprature: 1 } } }).message).toBe(
      'agents.researcher.temprature: is not a known field'
    )
  })

  it("refuses an agent's policy layer that reuses a task layer's name, naming the agent's field", () => {
    const clash = {
      ...task,
      policy: { layers: [{ name: 'team', allow: { read: ['**'] } }] },
      agents: { researcher: { ...task.agents.researcher, policy: { layers: [{ name: 'team', deny: { tool: ['docs__delete*'] } }] } } }
    }
    expect(errorOf(clash)).toMatchObject({ field: 'agents.researcher.policy.layers.0.name', message: expect.stringContaining('duplicates layer name "team"') })
  })

  it('refuses `agent` in a task: only agentvisor sets it on the children it starts', () => {
    expect(errorOf({ ...task, agent: 'researcher' }).message).toBe('agent: is set by agentvisor for child runs and is not allowed in a task')
    const child = Either.getOrThrow(parseChildContract({ ...task, agent: 'researcher' }, '/base'))
    expect(child.agent).toBe('researcher')
    expect(Either.isLeft(parseChildContract({ ...task, agent: 'ghost' }, '/base'))).toBe(true)
  })
})

describe('JSON Schema checks', () => {
  it('reports every violation with its JSON pointer', () => {
    const check = Either.getOrThrow(compileJsonSchema(task.agents.researcher.output, true))
    expect(check({ facts: ['a'] })).toEqual([])
    expect(describeViolations(check({ facts: [1, 'b', 2] }))).toBe('/facts/0: must be string; /facts/2: must be string')
    expect(describeViolations(check({}))).toBe('/facts: is required')
  })

  it('reads an output schema as the draft its $schema names, and two schemas may share an $id', () => {
    const pair = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: 'https://example.test/result',
      type: 'object',
      properties: { pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }], items: false } },
      additionalProperties: false
    }
    const check = Either.getOrThrow(compileJsonSchema(pair, true))
    expect(describeViolations(check({ pair: [1, 2, 3], extra: true }))).toBe(
      '/extra: is not allowed; /pair/0: must be string; /pair: must NOT have more than 2 items'
    )
    expect(Either.isRight(compileJsonSchema({ ...pair, required: ['pair'] }, true))).toBe(true)
  })
})
