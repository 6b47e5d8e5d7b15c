import { execFileSync } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { lastJson, runCli, tempDir, writeTask } from './support/cli.js'

// The CLI's refusals of bad input (exit 2, one line, nothing made), out of cli-run.test.ts so
// that the two files run at once.
describe('agentvisor run with bad input', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['malformed JSON', '{"goal": "x", ', /not valid JSON/],
    ['a missing goal', JSON.stringify({ workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }] }), /goal/],
    [
      'an unknown provider kind',
      JSON.stringify({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'gemini', model: 'm' }] }),
      /^agentvisor: .*: providers\.0\.kind: must be one of "openai", "anthropic", "scripted", got "gemini"$/
    ],
    [
      'an unknown approval mode',
      JSON.stringify({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }], approval: 'sometimes' }),
      /^agentvisor: .*: approval: must be one of "prompt", "defer", "auto", got "sometimes"$/
    ],
    [
      'a negative maxSteps',
      JSON.stringify({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }], limits: { maxSteps: -1 } }),
      /limits\.maxSteps/
    ]
  ]
  for (const [what, text, pattern] of cases) {
    it(`exits 2 with one clear line for ${what}`, async () => {
      const dir = tempDir()
      const task = writeTask(dir, text)
      const run = await runCli(['run', task, '--db', path.join(dir, 'av.db')])
      expect(run.code).toBe(2)
      const lines = run.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(pattern)
      expect(run.stderr).not.toMatch(/\n\s+at /)
      expect(existsSync(path.join(dir, 'ws'))).toBe(false)
    })
  }

  it('exits 2 naming a missing task file', async () => {
    const dir = tempDir()
    const run = await runCli(['run', path.join(dir, 'nope.json'), '--db', path.join(dir, 'av.db')])
    expect(run.code).toBe(2)
    expect(run.stderr).toMatch(/nope\.json: cannot read task file: ENOENT/)
  })

  it('exits 2 for an unknown command and an unknown flag', async () => {
    expect((await runCli(['frobnicate'])).code).toBe(2)
    const bad = await runCli(['runs', '--colour'])
    expect(bad.code).toBe(2)
    expect(bad.stderr.trim().split('\n')).toHaveLength(1)
  })
})

const scripted = [{ name: 'p', kind: 'scripted', steps: [] }]

describe('agentvisor run refuses bad input with exit 2, one line and nothing left in the store', () => {
  const json = (task: unknown) => (dir: string) => writeTask(dir, task)
  const text = (name: string, content: string) => (dir: string) => writeTask(dir, content, name)
  let allOf: unknown = { fileContains: { path: 'a', text: 'b' } }
  for (let i = 0; i < 1000; i++) allOf = { allOf: [allOf] }
  const cases: Array<[string, (dir: string) => string, RegExp]> = [
    ['the filesystem root as workspace', json({ goal: 'g', workspace: '/', providers: scripted }), /workspace: \/ is the filesystem root/],
    ['the home folder as workspace', json({ goal: 'g', workspace: homedir(), providers: scripted }), /workspace: .* is your home folder/],
    [
      'a lineage in the task file',
      json({ goal: 'g', workspace: 'ws', providers: scripted, lineage: { rootId: 'r', parentId: 'p', depth: 1, treeDispatchCeiling: 1e6 } }),
      /lineage: is set by agentvisor/
    ],
    ['an empty YAML file', text('task.yaml', ''), /the task must be an object with goal, workspace and providers, got nothing$/],
    ['a top-level YAML list', text('task.yaml', '- goal: g\n'), /must be an object with goal, workspace and providers, got a list$/],
    ['a top-level YAML string', text('task.yaml', 'just a goal\n'), /got a string$/],
    ['a JSON null', text('task.json', 'null'), /got nothing$/],
    ['a whitespace-only goal', json({ goal: '   ', workspace: 'ws', providers: scripted }), /goal: must have non-space text/],
    [
      'a file: baseUrl',
      json({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'openai', model: 'm', baseUrl: 'file:///etc/passwd' }] }),
      /providers\.0\.baseUrl: must be an http:\/\/ or https:\/\/ URL/
    ],
    [
      'an attemptTimeoutMs past the timer range',
      json({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [], attemptTimeoutMs: 2 ** 31 }] }),
      /providers\.0\.attemptTimeoutMs: must be at most 2147483647/
    ],
    [
      'a timeoutMs past the timer range',
      json({ goal: 'g', workspace: 'ws', providers: scripted, limits: { timeoutMs: 1e12 } }),
      /limits\.timeoutMs: must be at most/
    ],
    ['a YAML file that also draws a YAML warning', text('task.yaml', 'goal: !nosuchtag g\nworkspace: ws\n'), /providers: is missing/],
    // Written as text: JSON.stringify itself overflows at this depth.
    [
      'a task file 200,000 levels deep',
      text('task.json', `{"goal":${'{"a":'.repeat(200_000)}"g"${'}'.repeat(200_000)},"workspace":"ws","providers":${JSON.stringify(scripted)}}`),
      /goal: nests deeper than 64 levels/
    ],
    ['an allOf 1,000 deep', json({ goal: 'g', workspace: 'ws', providers: scripted, verify: allOf }), /verify: nests deeper than 64 levels/],
    [
      'a FIFO as the task file',
      (dir) => {
        const fifo = path.join(dir, 'task.json')
        execFileSync('mkfifo', [fifo])
        return fifo
      },
      /task\.json: cannot read task file: not a regular file/
    ],
    [
      'a workspace that names a file',
      (dir) => {
        writeFileSync(path.join(dir, 'afile'), 'x')
        return writeTask(dir, { goal: 'g', workspace: 'afile', providers: scripted })
      },
      /Cannot open workspace .*afile/
    ],
    [
      'a workspace that cannot be created',
      (dir) => {
        writeFileSync(path.join(dir, 'afile'), 'x')
        return writeTask(dir, { goal: 'g', workspace: 'afile/ws', providers: scripted })
      },
      /Cannot open workspace .*afile\/ws/
    ]
  ]
  for (const [what, make, pattern] of cases) {
    it(`for ${what}`, async () => {
      const dir = tempDir()
      const db = path.join(dir, 'av.db')
      const task = make(dir)
      const run = await runCli(['run', task, '--json', '--db', db])
      expect(run.code, run.stderr).toBe(2)
      const lines = run.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(pattern)
      expect(run.stderr).not.toMatch(/\n\s+at |internal error/)
      expect(lastJson(run)).toEqual({ error: { kind: 'input', message: lines[0]!.replace(/^agentvisor: /, '') } })
      // No run was made: the store holds none, or was not even created.
      if (existsSync(db)) expect(lastJson<unknown[]>(await runCli(['runs', '--json', '--db', db]))).toEqual([])
    })
  }
})

describe('approve --edit', () => {
  it('refuses edited arguments nested past 64 levels with exit 2 and one line', async () => {
    const dir = tempDir()
    const edit = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`
    const run = await runCli(['approve', 'some-run', '--edit', edit, '--json', '--db', path.join(dir, 'av.db')])
    expect(run.code).toBe(2)
    expect(run.stderr).toBe('agentvisor: --edit nests deeper than 64 levels\n')
    expect(lastJson(run)).toEqual({ error: { kind: 'input', message: '--edit nests deeper than 64 levels' } })
  })
})

describe('commands about runs that exist, on a path with no store', () => {
  const commands: ReadonlyArray<ReadonlyArray<string>> = [
    ['runs'],
    ['runs', '--json'],
    ['show', 'r1'],
    ['watch', 'r1'],
    ['inspect'],
    ['approve', 'r1'],
    ['answer', 'r1', 'yes'],
    ['cancel', 'r1'],
    ['send', 'r1', 'more'],
    ['resume', 'r1'],
    ['resume', '--all']
  ]
  for (const command of commands) {
    it(`${command.join(' ')} says so in one line, exits 2 and creates nothing`, async () => {
      const dir = tempDir()
      const db = path.join(dir, 'typo', 'av.db')
      const result = await runCli([...command, '--db', db])
      expect(result.code).toBe(2)
      expect(result.stderr).toBe(`agentvisor: no store at ${db}: nothing has run with it yet (check --db, or $AGENTVISOR_DB)\n`)
      expect(existsSync(path.join(dir, 'typo'))).toBe(false)
    })
  }
})
