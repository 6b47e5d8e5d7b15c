import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect, Either } from 'effect'
import { describe, expect, it } from 'vitest'
import { DEFAULT_LIMITS, loadTaskFile, parseTaskContract } from '@agentvisor/core'

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
