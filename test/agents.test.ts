import { readFileSync } from 'node:fs'
import * as path from 'node:path'
import { Agentvisor } from '@agentvisor/actors'
import { type MockLlm, spawnTethered } from '@agentvisor/cli'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, taskInTempDir, tempDir } from './support/cli.js'
import { natsWorldPerTest } from './support/nats.js'
import { serving } from './support/workers.js'
import { mockLlmPerTest } from './support/mock-llm.js'

// A lead agent delegating to a researcher with its own instructions, model, tools and result
// schema (docs/agents.md), over the mock LLM: each agent's model plays its own script.
const LEAD = 'lead-model'
const RESEARCHER = 'research-model'

const scenarios = {
  models: {
    [LEAD]: [
      { toolCalls: [{ name: 'spawn_child', arguments: { goal: 'Find the facts of ticket T-42', agent: 'researcher' } }] },
      { toolCalls: [{ name: 'write_file', arguments: { path: 'triage.md', content: 'T-42: login fails after the 2.3 upgrade\n' } }] },
      { toolCalls: [{ name: 'final_answer', arguments: { summary: 'T-42 is a login regression' } }] }
    ],
    [RESEARCHER]: [
      // Not the schema's shape: the researcher is told every violation and goes on.
      { toolCalls: [{ name: 'final_answer', arguments: { facts: 'login fails' } }] },
      { toolCalls: [{ name: 'final_answer', arguments: { facts: ['login fails after the 2.3 upgrade'] } }] }
    ]
  }
}

const taskFor = (baseUrl: string) => ({
  goal: 'Triage ticket T-42 and write the summary to triage.md',
  workspace: 'ws',
  providers: [{ name: 'primary', kind: 'openai', baseUrl, model: LEAD }],
  instructions: 'You lead a small support team. Delegate research, then write the summary yourself.',
  model: { temperature: 0.2, maxTokens: 2048 },
  tools: ['read_file', 'write_file', 'spawn_child'],
  delegates: ['researcher'],
  agents: {
    researcher: {
      description: 'Looks tickets and docs up; answers with facts and sources',
      instructions: 'Answer only from the tools results.',
      providers: [{ name: 'cheap', kind: 'openai', baseUrl, model: RESEARCHER }],
      model: { temperature: 0 },
      tools: ['read_file'],
      output: { type: 'object', properties: { facts: { type: 'array', items: { type: 'string' } } }, required: ['facts'] },
      limits: { maxSteps: 6 }
    }
  },
  output: { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'] },
  policy: { layers: [{ name: 'team', allow: { write: ['triage.md'] } }] },
  approval: 'defer'
})

interface Body {
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content?: string; readonly tool_call_id?: string }>
  readonly tools?: ReadonlyArray<{ readonly function: { readonly name: string; readonly description: string; readonly parameters: Record<string, unknown> } }>
  readonly temperature?: number
  readonly max_tokens?: number
}
const bodiesOf = (mock: MockLlm, model: string): Body[] => mock.requests.filter((r) => r.model === model).map((r) => r.body as Body)
const toolNames = (body: Body | undefined): string[] => (body?.tools ?? []).map((t) => t.function.name)
const toolMessages = (body: Body | undefined): string[] => (body?.messages ?? []).filter((m) => m.role === 'tool').map((m) => m.content ?? '')

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

/** What every run of the scenario must show, whoever drove it. */
const expectTheTeamWorked = (dir: string) => {
  const lead = bodiesOf(mock!, LEAD)
  const researcher = bodiesOf(mock!, RESEARCHER)
  expect(lead).toHaveLength(3)
  expect(researcher).toHaveLength(2)
  // The lead: its instructions after agentvisor's own, its settings, its tools and final_answer.
  expect(lead[0]!.messages[0]).toMatchObject({ role: 'system', content: expect.stringContaining('You lead a small support team.') })
  expect(lead[0]!.temperature).toBe(0.2)
  expect(lead[0]!.max_tokens).toBe(2048)
  expect(toolNames(lead[0])).toEqual(['read_file', 'write_file', 'spawn_child', 'final_answer'])
  const spawn = lead[0]!.tools!.find((t) => t.function.name === 'spawn_child')!.function
  expect(spawn.description).toContain('researcher: Looks tickets and docs up; answers with facts and sources')
  expect(spawn.parameters).toMatchObject({ properties: { agent: { enum: ['researcher'] } } })
  // The researcher: its own instructions and settings, only its tools, never the lead's.
  expect(researcher[0]!.messages[0]!.content).toContain('Answer only from the tools results.')
  expect(researcher[0]!.messages[0]!.content).not.toContain('You lead a small support team.')
  expect(researcher[0]!.temperature).toBe(0)
  expect(researcher[0]!.max_tokens).toBeUndefined()
  expect(toolNames(researcher[0])).toEqual(['read_file', 'final_answer'])
  // Its invalid result came back with the violation, and it went on.
  expect(toolMessages(researcher[1])).toEqual(['Invalid arguments for final_answer: the result does not match the output schema: /facts: must be array'])
  // The lead got the researcher's validated output as the spawn_child result, as JSON.
  const answer = JSON.parse(toolMessages(lead[1])[0]!) as Record<string, unknown>
  expect(answer).toMatchObject({ status: 'succeeded', steps: 2, output: { facts: ['login fails after the 2.3 upgrade'] } })
  expect(answer['runId']).toEqual(expect.any(String))
  expect(readFileSync(path.join(dir, 'ws', 'triage.md'), 'utf8')).toBe('T-42: login fails after the 2.3 upgrade\n')
}

describe('a team of named agents', () => {
  it("gives each agent its own instructions, settings and tools, and the lead the researcher's validated output, from av.run()", async () => {
    mock = await startMock.scenarios(scenarios)
    const dir = tempDir()
    const av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    try {
      const result = await av.run(Agentvisor.contract(taskFor(mock.url), dir))
      expect(result).toMatchObject({ status: 'succeeded', steps: 3, output: { summary: 'T-42 is a login regression' } })
    } finally {
      await av.close()
    }
    expectTheTeamWorked(dir)
  })

  it('returns the run output from `run --json`', async () => {
    mock = await startMock.scenarios(scenarios)
    const { dir, db, task } = taskInTempDir(taskFor(mock.url))
    const result = await runCli(['run', task, '--json', '--db', db])
    expect(result.stderr).not.toContain('    at ')
    expect(result.code).toBe(0)
    expect(lastJson(result)).toMatchObject({ status: 'succeeded', steps: 3, output: { summary: 'T-42 is a login regression' } })
    expectTheTeamWorked(dir)
    const trace = lastJson<{ output: unknown; steps: Array<{ toolCalls: Array<Record<string, unknown>> }> }>(
      await runCli(['show', lastJson<{ runId: string }>(result).runId, '--json', '--db', db])
    )
    expect(trace.output).toEqual({ summary: 'T-42 is a login regression' })
    expect(trace.steps.map((s) => s.toolCalls.map(({ name, source, effect }) => ({ name, source, effect })))).toEqual([
      [{ name: 'spawn_child', source: 'builtin', effect: 'idempotent' }],
      [{ name: 'write_file', source: 'builtin', effect: 'idempotent' }],
      [{ name: 'final_answer', source: 'builtin', effect: 'read' }]
    ])
  })

  it('refuses a task whose agent names a tool nobody offers, naming the field, before any run exists', async () => {
    const task = taskFor('http://127.0.0.1:9/v1')
    const { db, task: file } = taskInTempDir({ ...task, agents: { researcher: { ...task.agents.researcher, tools: ['read_file', 'lookup_ticket'] } } })
    const result = await runCli(['run', file, '--json', '--db', db])
    expect(result.code).toBe(2)
    expect(lastJson(result)).toEqual({
      error: { kind: 'input', message: expect.stringMatching(/^agents\.researcher\.tools\.1: no tool matches "lookup_ticket" \(the tools are read_file, /) }
    })
    expect(result.stderr).not.toContain('    at ')
    expect(lastJson(await runCli(['runs', '--json', '--db', db]))).toEqual([])
  })
})

describe('model settings', () => {
  it('reach the Anthropic adapter too: temperature, top_p and max_tokens in every request', async () => {
    mock = await startMock.scenarios({ models: { claude: [{ text: 'done' }] } })
    const dir = tempDir()
    const av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    try {
      const result = await av.run(
        Agentvisor.contract(
          {
            goal: 'Say done',
            workspace: 'ws',
            providers: [{ name: 'a', kind: 'anthropic', baseUrl: mock.url, model: 'claude' }],
            instructions: 'Be brief.',
            model: { temperature: 0.3, topP: 0.9, maxTokens: 512 }
          },
          dir
        )
      )
      expect(result).toMatchObject({ status: 'succeeded', output: 'done' })
    } finally {
      await av.close()
    }
    const [request] = mock.requests
    expect(request!.path).toBe('/v1/messages')
    expect(request!.body).toMatchObject({ temperature: 0.3, top_p: 0.9, max_tokens: 512, system: expect.stringContaining('Be brief.') })
  })
})

describe('a team of named agents over NATS', () => {
  const natsWorld = natsWorldPerTest()

  it('runs two researcher children on two workers with their own instructions and tools; the lead gets their outputs in spawn order', async () => {
    const research = (part: string) => ({ name: 'spawn_child', arguments: { goal: `Research part ${part}`, agent: 'researcher' } })
    const facts = (part: string) => [{ toolCalls: [{ name: 'final_answer', arguments: { facts: [`fact ${part}`] } }], delayMs: 300 }]
    mock = await startMock.scenarios({
      models: {
        [LEAD]: [{ toolCalls: [research('A'), research('B')] }, { toolCalls: [{ name: 'final_answer', arguments: { summary: 'two parts researched' } }] }]
      },
      goals: { 'Research part A': facts('A'), 'Research part B': facts('B') }
    })
    const { dir, db, task } = taskInTempDir(taskFor(mock.url))
    const world = natsWorld()
    const env = world.env
    const workers = await world.serving(db, 2)
    const result = await runCli(['run', task, '--json', '--db', db], { env })
    expect(result.code, result.stderr).toBe(0)
    expect(lastJson(result)).toMatchObject({ status: 'succeeded', steps: 2, output: { summary: 'two parts researched' } })
    for (const worker of workers) expect(worker.log()).toMatch(/run \S+ started \(child of /)
    const children = mock.requests.filter((r) => r.model === RESEARCHER).map((r) => r.body as Body)
    expect(children).toHaveLength(2)
    for (const body of children) {
      expect(body.messages[0]!.content).toContain('Answer only from the tools results.')
      expect(toolNames(body)).toEqual(['read_file', 'final_answer'])
      expect(body.temperature).toBe(0)
    }
    const answers = toolMessages(bodiesOf(mock, LEAD)[1]).map((text) => JSON.parse(text) as { status: string; output: unknown })
    expect(answers).toEqual([
      expect.objectContaining({ status: 'succeeded', output: { facts: ['fact A'] } }),
      expect.objectContaining({ status: 'succeeded', output: { facts: ['fact B'] } })
    ])
    void dir
  })
})

describe('tools a worker offers', () => {
  const natsWorld = natsWorldPerTest()
  const TICKET_TOOLS = path.join(import.meta.dirname, 'fixtures', 'tools', 'ticket-tools.mjs')
  const withLookup = (baseUrl: string) => {
    const task = taskFor(baseUrl)
    return { ...task, agents: { researcher: { ...task.agents.researcher, tools: ['lookup_ticket'] } } }
  }
  const lead = [
    { toolCalls: [{ name: 'spawn_child', arguments: { goal: 'Research ticket T-42', agent: 'researcher' } }] },
    { toolCalls: [{ name: 'final_answer', arguments: { summary: 'done' } }] }
  ]

  it("are offered to the children it drives: the researcher calls the worker's lookup_ticket", async () => {
    mock = await startMock.scenarios({
      models: {
        [LEAD]: lead,
        [RESEARCHER]: [
          { toolCalls: [{ name: 'lookup_ticket', arguments: { id: 'T-42' } }] },
          { toolCalls: [{ name: 'final_answer', arguments: { facts: ['reported by ana'] } }] }
        ]
      }
    })
    const { dir, db, task } = taskInTempDir(withLookup(mock.url))
    const world = natsWorld()
    const env = world.env
    const worker = world.worker(db, ['--tools', TICKET_TOOLS])
    await serving([worker])
    const result = await runCli(['run', task, '--json', '--db', db], { env })
    expect(result.code, result.stderr).toBe(0)
    const researcher = bodiesOf(mock, RESEARCHER)
    expect(toolNames(researcher[0])).toEqual(['lookup_ticket', 'final_answer'])
    expect(JSON.parse(toolMessages(researcher[1])[0]!)).toEqual({ id: 'T-42', title: 'Login fails after the 2.3 upgrade', reporter: 'ana' })
    expect(JSON.parse(toolMessages(bodiesOf(mock, LEAD)[1])[0]!)).toMatchObject({ status: 'succeeded', output: { facts: ['reported by ana'] } })
    void dir
  })

  it('fail a child that needs a tool its worker lacks, naming the tool and the worker, and the worker goes on', async () => {
    mock = await startMock.scenarios({ models: { [LEAD]: lead } })
    const { db, task } = taskInTempDir(withLookup(mock.url))
    const world = natsWorld()
    const env = world.env
    const worker = world.worker(db)
    await serving([worker])
    const result = await runCli(['run', task, '--json', '--db', db], { env })
    expect(result.code, result.stderr).toBe(0)
    const answer = JSON.parse(toolMessages(bodiesOf(mock, LEAD)[1])[0]!) as { status: string; error: { kind: string; message: string } }
    expect(answer.status).toBe('failed')
    expect(answer.error.kind).toBe('internal')
    expect(answer.error.message).toMatch(/^worker \S+\/\d+ cannot run it: tools\.0: no tool matches "lookup_ticket"/)
    expect(worker.child.exitCode).toBeNull()
    expect(worker.log()).toContain('cannot run child')
  })

  it('refuses a --tools module that does not load, with one line and exit 2', async () => {
    const result = await runCli(['worker', '--nats', 'nats://127.0.0.1:9', '--tools', path.join(tempDir(), 'missing.mjs')])
    expect(result.code).toBe(2)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toMatch(/--tools \(.*missing\.mjs\): /)
  })
})

describe('examples/agents', () => {
  it('runs on the mock LLM with no API key: the lead delegates, the researcher uses its module tool and MCP server, the typed result comes back', async () => {
    const dir = tempDir()
    const demo = await new Promise<{ code: number | null; stdout: string }>((resolve, reject) => {
      const child = spawnTethered(process.execPath, [path.join(import.meta.dirname, '..', 'examples', 'demo.mjs'), 'agents'], {
        env: { ...process.env, AGENTVISOR_DB: path.join(dir, 'av.db') },
        stdio: ['ignore', 'pipe', 'pipe']
      })
      let stdout = ''
      child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()))
      child.once('error', reject)
      child.once('close', (code) => resolve({ code, stdout }))
    })
    expect(demo.code, demo.stdout).toBe(0)
    expect(demo.stdout).toContain('"output":{"summary":"SSO login regression in 2.3","severity":"high"}')
    expect(demo.stdout).toContain('/severity: must be equal to one of the allowed values')
    const rows = lastJson<Array<{ id: string; parentId: string | null }>>(await runCli(['runs', '--json', '--db', path.join(dir, 'av.db')]))
    const child = rows.find((r) => r.parentId !== null)!
    const trace = lastJson<{ steps: Array<{ toolCalls: Array<Record<string, unknown>>; results: string[] }> }>(
      await runCli(['show', child.id, '--json', '--db', path.join(dir, 'av.db')])
    )
    expect(trace.steps[0]!.toolCalls.map(({ name, source, effect }) => ({ name, source, effect }))).toEqual([
      { name: 'lookup_ticket', source: 'module', effect: 'read' },
      { name: 'docs__search', source: 'mcp:docs', effect: 'read' }
    ])
    expect(trace.steps[0]!.results[0]).toContain('Only users with SSO are affected')
    expect(trace.steps[0]!.results[1]).toContain('sso.md: SSO logins go through the identity proxy')
  })
})
