import { Either, Schema } from 'effect'
import { describe, expect, it } from 'vitest'
import { TaskFile } from '@agentvisor/core'
import { checkedTaskFile } from '../src/contract/contract-check.js'

// The Schema as task-contract.ts decodes a task with it.
const bySchema = Schema.decodeUnknownEither(TaskFile, { errors: 'all', onExcessProperty: 'error' })

const BASES: ReadonlyArray<Record<string, unknown>> = [
  { goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'openai', model: 'm' }] },
  {
    goal: 'Fix the test',
    workspace: '/tmp/ws',
    providers: [
      { name: 'main', kind: 'openai', model: 'gpt', apiKeyEnv: 'KEY', baseUrl: 'http://127.0.0.1:9/v1', stream: true, attemptTimeoutMs: 1000 },
      { name: 'fb', kind: 'anthropic', model: 'c' }
    ],
    verify: { allOf: [{ fileContains: { path: 'a', text: 'x' } }, { fileEquals: { path: 'b', text: '' } }, { command: { run: 'true', exitCode: 0 } }] },
    limits: { maxSteps: 3, maxRetries: 0, dispatchCeiling: 9, timeoutMs: 60000 },
    policy: { layers: [{ name: 'team', allow: { read: ['**'], write: ['src/**'] }, ask: { exec: ['git *'] }, deny: { exec: ['rm *'] } }] },
    approval: 'auto',
    children: { maxChildren: 2, maxDepth: 0, maxConcurrent: 1 },
    sandbox: { exec: 'bwrap', network: false }
  },
  {
    goal: 'bench',
    workspace: 'ws',
    providers: [
      {
        name: 'script',
        kind: 'scripted',
        steps: [
          {
            toolCalls: [
              { name: 'list_dir', arguments: { path: '.', deep: { n: [1] } } },
              { name: 'bad', arguments: '{not json' }
            ]
          },
          { text: 'hi', delayMs: 1.5, usage: { inputTokens: 1, outputTokens: 0 } },
          { error: { status: 429, retryAfterMs: 0, message: 'slow', echoAuthorization: true } },
          { disconnect: true }
        ]
      }
    ],
    limits: { maxSteps: 11 },
    approval: 'defer',
    sandbox: { exec: 'none' },
    lineage: { rootId: 'r', parentId: 'p', depth: 1, treeDispatchCeiling: 5 }
  }
]

/** A value inside a contract, as the variants below change it. */
type Node = Record<string | number, unknown>
/** Gives the object at `parent[key]` a field no Schema names. */
const addField = (parent: Node, key: string | number): void => {
  const value = parent[key]
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) (value as Node).extra = 1
}

const ODD: ReadonlyArray<unknown> = [
  undefined,
  null,
  '',
  ' ',
  'x',
  0,
  -1,
  1.5,
  99,
  100,
  599,
  600,
  2 ** 31,
  Number.NaN,
  true,
  [],
  {},
  'ftp://a',
  'https://a',
  'none',
  'bwrap',
  'auto',
  'scripted'
]

/** Every value at every path, replaced by each odd value, removed, and (objects) given an unknown field. */
const variants = (base: unknown): unknown[] => {
  const out: unknown[] = [base]
  const paths: Array<ReadonlyArray<string | number>> = []
  const walk = (value: unknown, at: ReadonlyArray<string | number>) => {
    paths.push(at)
    if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) walk(v, [...at, Array.isArray(value) ? Number(k) : k])
  }
  walk(base, [])
  const at = (root: unknown, path: ReadonlyArray<string | number>, change: (parent: Node, key: string | number) => void) => {
    const copy = structuredClone(root)
    let parent = copy as Node
    for (const key of path.slice(0, -1)) parent = parent[key] as Node
    change(parent, path[path.length - 1]!)
    return copy
  }
  for (const path of paths) {
    if (path.length === 0) continue
    out.push(
      at(base, path, (p, k) => {
        if (Array.isArray(p)) p.splice(Number(k), 1)
        else delete p[k]
      })
    )
    for (const odd of ODD)
      out.push(
        at(base, path, (p, k) => {
          p[k] = odd
        })
      )
  }
  for (const path of paths) out.push(at({ root: base }, ['root', ...path], addField))
  return out
}

describe('the contract check by hand', () => {
  it('takes the common task shapes, giving exactly what the Schema gives', () => {
    for (const base of BASES) {
      const checked = checkedTaskFile(base)
      expect(checked).toBeDefined()
      expect(checked).toStrictEqual(Either.getOrThrow(bySchema(base)))
    }
  })

  it('never takes a task the Schema refuses, and gives what the Schema gives for every one it takes', () => {
    let taken = 0
    let tried = 0
    for (const base of BASES) {
      for (const variant of variants(base)) {
        tried += 1
        const checked = checkedTaskFile(variant)
        if (checked === undefined) continue
        taken += 1
        const decoded = bySchema(variant)
        if (Either.isLeft(decoded)) throw new Error(`taken by hand, refused by the Schema: ${JSON.stringify(variant)}`)
        expect(checked).toStrictEqual(decoded.right)
      }
    }
    // Both sides are exercised: many variants are valid, many are not.
    expect(taken).toBeGreaterThan(100)
    expect(tried - taken).toBeGreaterThan(500)
  })

  it('leaves objects it cannot vouch for to the Schema: class instances, symbol keys, a provider list that is not a list', () => {
    const base = BASES[0]!
    class Task {
      goal = 'g'
      workspace = 'ws'
      providers = [{ name: 'p', kind: 'openai', model: 'm' }]
    }
    expect(checkedTaskFile(new Task())).toBeUndefined()
    expect(checkedTaskFile({ ...base, [Symbol('s')]: 1 })).toBeUndefined()
    expect(checkedTaskFile({ ...base, providers: { 0: base.providers } })).toBeUndefined()
  })

  it('copies what it takes: changing the task afterwards does not change the decoded one', () => {
    const task = structuredClone(BASES[2]!) as { providers: [{ steps: [{ toolCalls: [{ name: string }] }] }]; limits: { maxSteps: number } }
    const checked = checkedTaskFile(task) as unknown as typeof task
    task.providers[0].steps[0].toolCalls[0].name = 'changed'
    task.limits.maxSteps = 99
    expect(checked.providers[0].steps[0].toolCalls[0].name).toBe('list_dir')
    expect(checked.limits.maxSteps).toBe(11)
  })
})
