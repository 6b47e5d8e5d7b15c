import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Either } from 'effect'
import { afterEach, describe, expect, it } from 'vitest'
import type { InspectionEvent } from 'xstate'
import { Agentvisor, loadRunSnapshots, RunNotResumableError, runMachine } from '@agentvisor/actors'
import { listJournalEntries, listTransitions, openStore } from '@agentvisor/store'
import type { RunEvent } from '../src/machine/run-machine.js'
import {
  decodeRunSnapshot,
  encodeRunSnapshot,
  initialRunSnapshot,
  nextRunSnapshot,
  persistRunSnapshot,
  STORED_CONTEXT_FIELDS
} from '../src/machine/run-snapshot.js'
import { runCall } from '../../../test/support/run-call.js'

const dirs: string[] = []
const tempDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'av-snapshots-'))
  dirs.push(dir)
  return dir
}
let av: Agentvisor | undefined
afterEach(async () => {
  await av?.close()
  av = undefined
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const withStore = async <A>(dir: string, f: (store: Awaited<ReturnType<typeof openStore>>) => Promise<A>): Promise<A> => {
  const store = await openStore(path.join(dir, 'av.db'))
  try {
    return await f(store)
  } finally {
    await store.close()
  }
}

/** JSON as the store would hold it: `undefined` fields dropped, so two snapshots compare by content. */
const plain = (value: unknown): unknown => JSON.parse(JSON.stringify(value))

describe('time travel over the compact journal (docs/durability.md, "The journal")', () => {
  it("gives, for every transition, the very snapshot the driver's actor had after it, inside an entry as at its end", async () => {
    const dir = tempDir()
    // Every snapshot the run's actor took, as XState reports it live: the reference to compare with.
    const live: unknown[] = []
    let previous: unknown
    const inspect = (event: InspectionEvent) => {
      // XState's own events (`xstate.init`, `xstate.stop`) are no transitions of the run.
      if (event.type !== '@xstate.snapshot' || event.event.type.startsWith('xstate.') || event.snapshot === previous) return
      previous = event.snapshot
      live.push(plain(runMachine.getPersistedSnapshot(event.snapshot as never)))
    }
    av = await Agentvisor.open({ db: path.join(dir, 'av.db'), inspect, retryPolicy: { baseDelayMs: 1, maxDelayMs: 5, jitter: 0 } })
    const result = await av.run({
      goal: 'g',
      workspace: path.join(dir, 'ws'),
      approval: 'auto',
      providers: [
        {
          name: 'script',
          kind: 'scripted',
          steps: [
            { error: { status: 503 } },
            { toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] },
            { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }
          ]
        }
      ],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } }
    })
    expect(result).toMatchObject({ status: 'succeeded', steps: 2 })

    const { snapshots, entries, transitions } = await withStore(dir, async (store) => ({
      snapshots: await runCall(loadRunSnapshots(store.db, result.runId)),
      entries: await runCall(listJournalEntries(store.db, result.runId)),
      transitions: await runCall(listTransitions(store.db, result.runId))
    }))
    expect(transitions.map((t) => t.to_state)).toEqual([
      'retrying',
      'dispatching',
      'acting',
      'verifying',
      'dispatching',
      'acting',
      'verifying',
      'finished.succeeded'
    ])
    // Pure transitions share their commit: step 1's reply, its read-only tool and its
    // verification are one entry of three transitions.
    expect(entries.map((e) => [e.first_seq, e.seq])).toContainEqual([3, 5])
    expect(entries.length).toBeLessThan(transitions.length)
    expect(live).toHaveLength(transitions.length)
    expect(snapshots?.map((s) => s.seq)).toEqual(transitions.map((t) => t.seq))
    expect(snapshots?.map((s) => plain(Either.getOrThrow(s.snapshot)))).toEqual(live)
    // The middle of that entry, which the store holds no snapshot for.
    expect(transitions[3]).toMatchObject({ seq: 4, from_state: 'acting', to_state: 'verifying', snapshot_json: null })
    expect(Either.getOrThrow(snapshots![3]!.snapshot)).toMatchObject({ value: 'verifying', context: { step: 1, completedSteps: 1, retries: 1, dispatches: 2 } })
  })

  it('refuses to resume a run whose last snapshot has a schema version it does not read, naming the run and the version', async () => {
    const dir = tempDir()
    av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    const paused = await av.run({
      goal: 'g',
      workspace: path.join(dir, 'ws'),
      approval: 'defer',
      providers: [{ name: 'script', kind: 'scripted', steps: [{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }] }]
    })
    expect(paused.status).toBe('awaiting_approval')
    await av.close()
    av = undefined
    // What a newer agentvisor would have written.
    const before = await withStore(dir, async (store) => {
      const last = (await runCall(listJournalEntries(store.db, paused.runId))).at(-1)!
      await store.db
        .updateTable('journal_entries')
        .set({ snapshot_json: '{"v":3,"snapshot":{"value":"awaitingApproval","context":{}}}' })
        .where('run_id', '=', paused.runId)
        .where('seq', '=', last.seq)
        .execute()
      return runCall(listTransitions(store.db, paused.runId))
    })

    av = await Agentvisor.open({ db: path.join(dir, 'av.db') })
    const refusal = await av.resume(paused.runId).then(
      () => undefined,
      (error: unknown) => error
    )
    expect(refusal).toBeInstanceOf(RunNotResumableError)
    expect((refusal as RunNotResumableError).message).toBe(
      `run ${paused.runId} cannot be resumed: its last snapshot has schema version 3, which this agentvisor does not read (it reads versions 1 and 2): it was written by another version of agentvisor`
    )
    await av.close()
    av = undefined
    // Nothing was written: the run is where it was.
    await withStore(dir, async (store) => {
      expect(await runCall(listTransitions(store.db, paused.runId))).toEqual(before)
      expect((await store.db.selectFrom('runs').select('status').where('id', '=', paused.runId).executeTakeFirst())?.status).toBe('awaiting_approval')
    })
  })
})

describe('the persisted run snapshot', () => {
  it("is exactly XState's getPersistedSnapshot in every state a run passes through, finished included", () => {
    const input = { maxSteps: 2, maxRetries: 1, dispatchCeiling: 10, providerCount: 2, timeoutMs: 1000 }
    const events: RunEvent[] = [
      { type: 'PROVIDER_ERROR', error: { kind: 'transient', message: '503' }, retryAt: 5 },
      { type: 'NEXT_PROVIDER' },
      { type: 'PROVIDER_OK', hasToolCalls: true },
      { type: 'TOOLS_DONE' },
      { type: 'VERIFY_FAILED' },
      { type: 'PROVIDER_OK', hasToolCalls: false },
      { type: 'VERIFY_PASSED' }
    ]
    let snapshot = initialRunSnapshot(input)
    const seen: string[] = []
    for (const event of [undefined, ...events]) {
      if (event !== undefined) snapshot = nextRunSnapshot(snapshot, event)
      seen.push(JSON.stringify(snapshot.value))
      expect(JSON.stringify(persistRunSnapshot(snapshot))).toBe(JSON.stringify(runMachine.getPersistedSnapshot(snapshot)))
    }
    expect(seen.at(-1)).toBe('{"finished":"succeeded"}')
  })

  it('is stored without the machine input, as JSON.stringify would write it, and read back whole with the input, in every state', () => {
    const input = { maxSteps: 2, maxRetries: 1, dispatchCeiling: 10, providerCount: 2, timeoutMs: 1000 }
    const inputKeys = Object.keys(input)
    const events: RunEvent[] = [
      // An error whose message needs escaping in JSON: quotes, a backslash, a newline, a control character.
      { type: 'PROVIDER_ERROR', error: { kind: 'transient', message: 'a "503"\\ from\nthe\u0001 server', httpStatus: 503 }, retryAt: 5 },
      { type: 'NEXT_PROVIDER' },
      { type: 'PROVIDER_OK', hasToolCalls: true },
      { type: 'TOOLS_DONE' },
      { type: 'VERIFY_FAILED' },
      { type: 'CHILDREN_SPAWNED' },
      { type: 'FAIL', error: { kind: 'internal', message: 'x' } },
      // A follow-up's new turn: the turn fields are written from then on.
      { type: 'FOLLOW_UP', at: 1_700_000_000_000, text: 'and now "this"' },
      { type: 'PROVIDER_OK', hasToolCalls: false },
      { type: 'FAIL', error: { kind: 'internal', message: 'y' } }
    ]
    let snapshot = initialRunSnapshot(input)
    for (const event of [undefined, ...events]) {
      // CHILDREN_SPAWNED is ignored outside `acting`: the state is what the machine made of it.
      if (event !== undefined) snapshot = nextRunSnapshot(snapshot, event)
      const encoded = encodeRunSnapshot(snapshot)
      const whole = JSON.parse(JSON.stringify(persistRunSnapshot(snapshot))) as { status: string; value: unknown; context: Record<string, unknown> }
      const stored = Object.fromEntries(Object.entries(whole.context).filter(([key]) => !inputKeys.includes(key)))
      // A run of one turn writes no turn fields (`turnStart`, `turnAt`).
      expect(Object.keys(stored)).toHaveLength(STORED_CONTEXT_FIELDS - (snapshot.context.turnStart === undefined ? 2 : 0))
      expect(encoded).toBe(JSON.stringify({ v: 2, snapshot: { status: whole.status, value: whole.value, context: stored } }))
      expect(Either.getOrThrow(decodeRunSnapshot(encoded, input))).toEqual(whole)
      // Without the input (a contract that does not read), the context as stored.
      expect(Either.getOrThrow(decodeRunSnapshot(encoded, undefined)).context).toEqual(stored)
    }
    expect(snapshot.value).toEqual({ finished: 'failed' })
  })

  it('reads a version 1 snapshot as it was stored, whatever the input', () => {
    const input = { maxSteps: 3, maxRetries: 1, dispatchCeiling: 10, providerCount: 1, timeoutMs: 1000 }
    const v1 = JSON.stringify({
      v: 1,
      snapshot: runMachine.getPersistedSnapshot(nextRunSnapshot(initialRunSnapshot(input), { type: 'PROVIDER_OK', hasToolCalls: false }))
    })
    const read = Either.getOrThrow(decodeRunSnapshot(v1, { ...input, maxSteps: 99 }))
    expect(read).toEqual(JSON.parse(v1).snapshot)
    expect(read.context.maxSteps).toBe(3)
  })
})
