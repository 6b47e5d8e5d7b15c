import { execFileSync } from 'node:child_process'
import { mkdtempSync, symlinkSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect, Either } from 'effect'
import { describe, expect, it, vi } from 'vitest'
import {
  DEFAULT_LIMITS,
  jsonTextTooDeep,
  loadTaskFile,
  MAX_NESTING_DEPTH,
  openWorkspace,
  parseChildContract,
  parseTaskContract,
  runTool,
  TOO_DEEP_ARGUMENTS
} from '@agentvisor/core'
import { makeScriptedProvider } from '@agentvisor/core/testing'
import { valueTooDeepAt } from '../src/contract/nesting.js'

const valid = {
  goal: 'Write DONE into out.txt',
  workspace: 'ws',
  providers: [{ name: 'primary', kind: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'gpt-4o-mini' }],
  verify: { fileContains: { path: 'out.txt', text: 'DONE' } }
}

const errorOf = (input: unknown) => {
  const result = parseTaskContract(input, '/base')
  if (Either.isRight(result)) throw new Error('expected a validation error')
  return result.left
}

describe('task contract', () => {
  it('applies the documented defaults and resolves the workspace against the base folder', () => {
    const contract = Either.getOrThrow(parseTaskContract(valid, '/base'))
    expect(contract.workspace).toBe('/base/ws')
    expect(contract.limits).toEqual(DEFAULT_LIMITS)
    expect(contract.approval).toBe('prompt')
    expect(contract.policy.layers).toEqual([])
  })

  it('names the offending field of a bad limit', () => {
    const error = errorOf({ ...valid, limits: { maxSteps: 0 } })
    expect(error.field).toBe('limits.maxSteps')
    expect(error.message).toMatch(/^limits\.maxSteps: /)
    expect(error.message).not.toContain('\n')
  })

  it('rejects an unknown provider kind naming providers.0.kind', () => {
    const error = errorOf({ ...valid, providers: [{ name: 'p', kind: 'gemini', model: 'm' }] })
    expect(error.field).toBe('providers.0.kind')
  })

  it('requires a model for http providers and steps for scripted ones', () => {
    expect(errorOf({ ...valid, providers: [{ name: 'p', kind: 'openai' }] }).field).toBe('providers.0.model')
    expect(errorOf({ ...valid, providers: [{ name: 'p', kind: 'scripted' }] }).field).toBe('providers.0.steps')
  })

  it('rejects a misspelt field instead of ignoring it', () => {
    const error = errorOf({ ...valid, limits: { maxStep: 3 } })
    expect(error.message).toBe('limits.maxStep: is not a known field')
  })

  it('rejects duplicate provider names', () => {
    const p = valid.providers[0]!
    expect(errorOf({ ...valid, providers: [p, p] }).field).toBe('providers.1.name')
  })

  it('reads YAML task files and resolves the workspace against the file folder', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'av-contract-'))
    const file = path.join(dir, 'task.yaml')
    writeFileSync(file, 'goal: hi\nworkspace: w\nproviders:\n  - { name: s, kind: scripted, steps: [ { text: ok } ] }\n')
    const contract = await Effect.runPromise(loadTaskFile(file))
    expect(contract.workspace).toBe(path.join(dir, 'w'))
    expect(contract.providers[0].steps).toEqual([{ text: 'ok' }])
  })

  it('reports malformed JSON as one line', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'av-contract-'))
    const file = path.join(dir, 'task.json')
    writeFileSync(file, '{"goal": ')
    const error = await Effect.runPromise(Effect.flip(loadTaskFile(file)))
    expect(error.message).toMatch(/^not valid JSON: /)
    expect(error.message).not.toContain('\n')
  })
})

const nest = (depth: number, leaf: unknown = 1): unknown => {
  let value = leaf
  for (let i = 0; i < depth; i++) value = { a: value }
  return value
}

describe('task contract input limits (docs/task-file.md, "Limits on input")', () => {
  it('finds the path where a value first nests past the limit, at the limit exactly, and in a cycle', () => {
    // `nest(n)` is n objects deep; the outermost is level 1.
    expect(valueTooDeepAt(nest(64), 64)).toBeUndefined()
    expect(valueTooDeepAt(nest(65), 64)).toEqual(Array.from({ length: 64 }, () => 'a'))
    expect(valueTooDeepAt({ x: 1, list: [{ b: [[[{}]]] }] }, 7)).toBeUndefined()
    expect(valueTooDeepAt({ x: 1, list: [{ b: [[[{}]]] }] }, 5)).toEqual(['list', '0', 'b', '0', '0'])
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic.self = cyclic
    expect(valueTooDeepAt(cyclic, 8)).toEqual(Array.from({ length: 8 }, () => 'self'))
    expect(valueTooDeepAt('text')).toBeUndefined()
  })

  it('refuses the filesystem root and the home folder as a workspace, naming workspace', () => {
    for (const workspace of ['/', homedir(), path.join(homedir(), 'sub', '..')]) {
      const error = errorOf({ ...valid, workspace })
      expect(error.field).toBe('workspace')
      expect(error.message).toMatch(/^workspace: .* is (the filesystem root|your home folder)/)
    }
  })

  it('refuses a workspace that is a symlink to the filesystem root', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'av-contract-'))
    symlinkSync('/', path.join(dir, 'root-link'))
    const contract = parseTaskContract({ ...valid, workspace: 'root-link' }, dir)
    expect(Either.isLeft(contract) && contract.left.message).toBe(
      `workspace: ${path.join(dir, 'root-link')} is the filesystem root; give the run a folder of its own`
    )
  })

  it('refuses lineage from a task, while the internal entry for child contracts keeps it', () => {
    const lineage = { rootId: 'r', parentId: 'p', depth: 1, treeDispatchCeiling: 1_000_000 }
    const error = errorOf({ ...valid, lineage })
    expect(error.field).toBe('lineage')
    expect(error.message).toMatch(/^lineage: is set by agentvisor/)
    expect(Either.getOrThrow(parseChildContract({ ...valid, lineage }, '/base')).lineage).toEqual(lineage)
  })

  it('names the field of a value nested past 64 levels, however deep, without overflowing', () => {
    const deep = errorOf({ ...valid, goal: nest(200_000) })
    expect(deep.field).toBe('goal')
    expect(deep.message).toBe(`goal: nests deeper than ${MAX_NESTING_DEPTH} levels of objects and lists (the most a task may)`)
    let verify: unknown = { fileContains: { path: 'a', text: 'b' } }
    for (let i = 0; i < 1000; i++) verify = { allOf: [verify] }
    expect(errorOf({ ...valid, verify }).field).toBe('verify')
    // Just within the limit still decodes: the limit is the rule, not a stack that happens to hold.
    let shallow: unknown = { fileContains: { path: 'a', text: 'b' } }
    for (let i = 0; i < 30; i++) shallow = { allOf: [shallow] }
    expect(Either.isRight(parseTaskContract({ ...valid, verify: shallow }, '/base'))).toBe(true)
  })

  it('refuses a cyclic task object from the TS API as too deep instead of looping', () => {
    const verify: { allOf: unknown[] } = { allOf: [] }
    verify.allOf.push(verify)
    expect(errorOf({ ...valid, verify }).field).toBe('verify')
  })

  it('says what the top level should be when it is not an object', () => {
    for (const [input, got] of [
      [null, 'nothing'],
      [undefined, 'nothing'],
      [['goal'], 'a list'],
      ['goal: x', 'a string'],
      [3, 'a number']
    ] as const) {
      expect(errorOf(input).message).toBe(`the task must be an object with goal, workspace and providers, got ${got}`)
    }
  })

  it('describes a wrong kind of value in a few words instead of printing the schema', () => {
    const cases: Array<[unknown, string]> = [
      [{ ...valid, providers: ['x'] }, 'providers.0: must be an object, got a string'],
      [{ ...valid, limits: 4 }, 'limits: must be an object, got a number'],
      [{ ...valid, verify: 3 }, 'verify: must be an object, got a number'],
      [{ ...valid, providers: 'p' }, 'providers: must be a list, got a string'],
      [{ ...valid, providers: [] }, 'providers: must not be empty'],
      [{ ...valid, verify: { allOf: [{ command: { run: 'x', exitCode: 1.5 } }] } }, 'verify.allOf.0.command.exitCode: Expected an integer, actual 1.5']
    ]
    for (const [input, message] of cases) expect(errorOf(input).message).toBe(message)
  })

  it('requires a goal with text other than spaces', () => {
    expect(errorOf({ ...valid, goal: ' \n\t ' }).message).toBe('goal: must have non-space text')
  })

  it('accepts only http and https base URLs, naming providers.N.baseUrl', () => {
    for (const baseUrl of ['file:///etc/passwd', 'ftp://127.0.0.1/', 'not a url', '127.0.0.1:8080']) {
      const error = errorOf({ ...valid, providers: [{ name: 'p', kind: 'openai', model: 'm', baseUrl }] })
      expect(error.message).toBe('providers.0.baseUrl: must be an http:// or https:// URL')
    }
    expect(
      Either.isRight(parseTaskContract({ ...valid, providers: [{ name: 'p', kind: 'anthropic', model: 'm', baseUrl: 'https://127.0.0.1/v1' }] }, '/base'))
    ).toBe(true)
  })

  it('keeps every duration that becomes a timer within 2^31-1 ms', () => {
    const tooLong = 2 ** 31
    expect(errorOf({ ...valid, limits: { timeoutMs: tooLong } }).field).toBe('limits.timeoutMs')
    expect(errorOf({ ...valid, providers: [{ ...valid.providers[0], attemptTimeoutMs: tooLong }] }).field).toBe('providers.0.attemptTimeoutMs')
    expect(errorOf({ ...valid, providers: [{ name: 's', kind: 'scripted', steps: [{ text: 'x', delayMs: tooLong }] }] }).field).toBe(
      'providers.0.steps.0.delayMs'
    )
    expect(errorOf({ ...valid, providers: [{ name: 's', kind: 'scripted', steps: [{ error: { status: 503, retryAfterMs: tooLong } }] }] }).field).toBe(
      'providers.0.steps.0.error.retryAfterMs'
    )
    expect(Either.getOrThrow(parseTaskContract({ ...valid, limits: { timeoutMs: tooLong - 1 } }, '/base')).limits.timeoutMs).toBe(tooLong - 1)
    expect(errorOf({ ...valid, limits: { maxSteps: 2 ** 53 } }).field).toBe('limits.maxSteps')
  })
})

describe('task file reading limits', () => {
  const fileWith = (name: string, text: string): string => {
    const dir = mkdtempSync(path.join(tmpdir(), 'av-contract-'))
    const file = path.join(dir, name)
    writeFileSync(file, text)
    return file
  }
  const loadError = (file: string) => Effect.runPromise(Effect.flip(loadTaskFile(file)))

  it('refuses a FIFO and a folder without reading from them', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'av-contract-'))
    const fifo = path.join(dir, 'task.json')
    execFileSync('mkfifo', [fifo])
    // Nobody ever writes to the FIFO: a read would block this test forever.
    expect((await loadError(fifo)).message).toBe('cannot read task file: not a regular file')
    expect((await loadError(dir)).message).toBe('cannot read task file: it is a folder')
  })

  it('refuses an empty YAML file saying what the top level should be', async () => {
    expect((await loadError(fileWith('task.yaml', ''))).message).toBe('the task must be an object with goal, workspace and providers, got nothing')
    expect((await loadError(fileWith('task.yaml', '- goal\n'))).message).toMatch(/got a list$/)
  })

  it('reports YAML nested deeper than its parser can go as the nesting rule', async () => {
    // Deep enough to overflow the parser's recursion (it gives up near a thousand levels).
    const depth = 20_000
    const error = await loadError(fileWith('task.yaml', `goal: ${'['.repeat(depth)}${']'.repeat(depth)}\n`))
    expect(error.message).toBe(`the file nests deeper than ${MAX_NESTING_DEPTH} levels of objects and lists (the most a task may)`)
  })

  it('prints no YAML warning while reading a task', async () => {
    const warned = vi.spyOn(process, 'emitWarning')
    try {
      const contract = await Effect.runPromise(
        loadTaskFile(fileWith('task.yaml', 'goal: !unknown hi\nworkspace: w\nproviders: [{ name: s, kind: scripted, steps: [] }]\n'))
      )
      expect(contract.goal).toBe('hi')
      expect(warned).not.toHaveBeenCalled()
    } finally {
      warned.mockRestore()
    }
  })
})

describe('nesting of JSON text (tool-call arguments)', () => {
  it('counts objects and lists only, not brackets inside strings or after escaped quotes', () => {
    const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`
    expect(jsonTextTooDeep(deep(MAX_NESTING_DEPTH))).toBe(false)
    expect(jsonTextTooDeep(deep(MAX_NESTING_DEPTH + 1))).toBe(true)
    expect(jsonTextTooDeep(`{"text":"${'['.repeat(1000)}"}`)).toBe(false)
    expect(jsonTextTooDeep(`{"text":"\\"${'{'.repeat(1000)}"}`)).toBe(false)
    expect(jsonTextTooDeep(`{"text":"\\\\",${'"a":{'.repeat(100)}1${'}'.repeat(100)}}`)).toBe(true)
  })

  it('answers a scripted tool call nested past the limit as malformed, naming the limit', async () => {
    const ws = await Effect.runPromise(openWorkspace(mkdtempSync(path.join(tmpdir(), 'av-ws-'))))
    const provider = makeScriptedProvider({ steps: [{ toolCalls: [{ name: 'list_dir', arguments: nest(100, {}) as Record<string, unknown> }] }] })
    const reply = await Effect.runPromise(provider.chat({ messages: [], tools: [] }))
    expect(reply.toolCalls[0]!.arguments).toBe(TOO_DEEP_ARGUMENTS)
    const outcome = await Effect.runPromise(runTool(ws, reply.toolCalls[0]!))
    expect(outcome).toMatchObject({ ok: false, output: 'Invalid arguments for list_dir: nested deeper than 64 levels; send flatter arguments' })
  })
})
