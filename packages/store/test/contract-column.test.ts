import { Either } from 'effect'
import { describe, expect, it } from 'vitest'
import { checkedStoredContract } from '@agentvisor/core'
import { jsonColumn } from '../src/json-column.js'
import { ContractJson, decodeRunWithContract } from '../src/tables/runs.columns.js'
import { CONTRACT } from './support/temp-store.js'

// The column's Schema, as the store read every contract before the check by hand.
const bySchema = jsonColumn(ContractJson)

const BASES: ReadonlyArray<Record<string, unknown>> = [
  CONTRACT,
  {
    ...CONTRACT,
    providers: [
      { name: 's', kind: 'scripted', steps: [{ toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] }, { text: 'done', delayMs: 5 }] },
      { name: 'o', kind: 'openai', model: 'm', baseUrl: 'https://127.0.0.1/v1', attemptTimeoutMs: 100 }
    ],
    verify: { allOf: [{ command: { run: 'true' } }, { fileEquals: { path: 'a', text: 'b' } }] },
    policy: { layers: [{ name: 'l', allow: { read: ['**'] }, deny: { write: ['.git/**'] } }] },
    approval: 'auto',
    sandbox: { exec: 'bwrap', network: true },
    lineage: { rootId: 'r', parentId: 'p', depth: 2, treeDispatchCeiling: 50 }
  }
]

/** A value inside a contract, as the variants below change it. */
type Node = Record<string | number, unknown>
/** Gives the object at `parent[key]` a field no Schema names. */
const addField = (parent: Node, key: string | number): void => {
  const value = parent[key]
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) (value as Node).extra = 1
}

const ODD: ReadonlyArray<unknown> = [null, '', 'x', 0, -1, 1.5, 2 ** 31, true, [], {}, 'ftp://a', 'none', 'auto']

const variants = (base: unknown): string[] => {
  const out: unknown[] = [base]
  const paths: Array<ReadonlyArray<string | number>> = []
  const walk = (value: unknown, at: ReadonlyArray<string | number>) => {
    paths.push(at)
    if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) walk(v, [...at, Array.isArray(value) ? Number(k) : k])
  }
  walk(base, [])
  const at = (path: ReadonlyArray<string | number>, change: (parent: Node, key: string | number) => void) => {
    const copy: Node = { root: structuredClone(base) }
    let parent = copy
    for (const key of ['root', ...path].slice(0, -1)) parent = parent[key] as Node
    change(parent, ['root', ...path][path.length]!)
    return copy.root
  }
  for (const path of paths) {
    if (path.length > 0) {
      out.push(
        at(path, (p, k) => {
          if (Array.isArray(p)) p.splice(Number(k), 1)
          else delete p[k]
        })
      )
      for (const odd of ODD)
        out.push(
          at(path, (p, k) => {
            p[k] = odd
          })
        )
    }
    out.push(at(path, addField))
  }
  return [...out.map((v) => JSON.stringify(v)), '', 'null', '{', '[]', '"text"']
}

describe('the stored contract column', () => {
  it('is read by the check by hand when agentvisor wrote it, exactly as the Schema reads it', () => {
    for (const base of BASES) {
      const text = JSON.stringify(base)
      expect(checkedStoredContract(text)).toBeDefined()
      expect(checkedStoredContract(text)).toStrictEqual(Either.getOrThrow(bySchema(text)))
    }
  })

  it('is never read by hand when the Schema refuses it, and reads the same when both take it', () => {
    let taken = 0
    let tried = 0
    for (const base of BASES) {
      for (const text of variants(base)) {
        tried += 1
        const checked = checkedStoredContract(text)
        if (checked === undefined) continue
        taken += 1
        const decoded = bySchema(text)
        if (Either.isLeft(decoded)) throw new Error(`taken by hand, refused by the Schema: ${text}`)
        expect(checked).toStrictEqual(decoded.right)
      }
    }
    expect(taken).toBeGreaterThan(50)
    expect(tried - taken).toBeGreaterThan(200)
  })

  it('still fails a corrupt contract with a StoreError naming the run, the column and what is wrong', () => {
    const row = {
      id: 'run-9',
      parent_id: null,
      root_id: 'run-9',
      state: 'dispatching',
      status: 'running',
      steps: 0,
      error_json: null,
      created_at: '2026-12-01T12:00:00.000Z',
      updated_at: '2026-12-01T12:00:00.000Z'
    }
    const read = (contract_json: string) => {
      try {
        decodeRunWithContract({ ...row, contract_json } as never)
        return undefined
      } catch (error) {
        return error as { _tag: string; message: string; runId: string; column: string }
      }
    }
    expect(read(JSON.stringify(CONTRACT))).toBeUndefined()
    const error = read(JSON.stringify({ ...CONTRACT, limits: { ...CONTRACT.limits, maxSteps: 0 } }))
    expect(error).toMatchObject({ _tag: 'StoreError', runId: 'run-9', column: 'run_contracts.contract_json' })
    expect(error?.message).toContain('limits.maxSteps')
  })
})
