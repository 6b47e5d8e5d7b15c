import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { type Database, insertRun, openStore } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Kysely } from 'kysely'
import { describe, expect, it, onTestFinished } from 'vitest'
import { Agentvisor } from '../src/api/agentvisor.js'
import { makeInProcessBus } from '../src/bus/in-process-bus.js'
import { childRunId, childRunRow } from '../src/protocol/child-contract.js'
import { makeChildRuns } from '../src/driver/child-runs.js'
import { runCall } from '../../../test/support/run-call.js'

/** The store as the wait sees it, its first `failures` queries refused the way a busy SQLite refuses. */
const flaky = (db: Kysely<Database>, failures: number): { db: Kysely<Database>; refused: () => number } => {
  let refused = 0
  const proxy = new Proxy(db, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown
      if (property !== 'selectFrom' || typeof value !== 'function') return value
      return (...args: unknown[]) => {
        if (refused < failures) {
          refused += 1
          throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args)
      }
    }
  })
  return { db: proxy, refused: () => refused }
}

describe('waiting for child runs', () => {
  it('logs a store query that fails while it waits, asks again, and ends once the children have', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'av-child-runs-'))
    const store = await openStore(path.join(dir, 'av.db'))
    onTestFinished(() => store.close())
    const contract = Agentvisor.contract({ goal: 'Split the work', workspace: dir, providers: [{ name: 'p', kind: 'scripted', steps: [] }] })
    const at = new Date().toISOString()
    await runCall(insertRun(store.db, childRunRow('parent', null, contract, at)))
    // The child the step's spawn_child made (its id derives from the call), ended already.
    await runCall(
      insertRun(store.db, {
        ...childRunRow(childRunId('parent', 1, 0), 'parent', contract, at),
        status: 'succeeded',
        state: 'finished.succeeded',
        ended_at: at
      })
    )
    const { db, refused } = flaky(store.db, 2)
    const lines: string[] = []
    const children = makeChildRuns({
      db,
      runId: 'parent',
      contract,
      bus: makeInProcessBus(),
      toolCalls: () => [{ id: 'call-1', name: 'spawn_child', arguments: '{"goal":"part A"}' }],
      warn: (line) => lines.push(line)
    })

    const outcome = await Effect.runPromise(children.awaitChildren(1))

    expect(outcome.event).toEqual({ type: 'CHILDREN_DONE' })
    expect(refused()).toBe(2)
    expect(lines).toEqual([
      'run parent: load its children failed, trying again: store: load child runs failed: database is locked',
      'run parent: load its children failed, trying again: store: load child runs failed: database is locked'
    ])
  })
})
