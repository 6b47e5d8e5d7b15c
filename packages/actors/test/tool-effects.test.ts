import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Deferred, Effect, Either, Fiber } from 'effect'
import { createActor } from 'xstate'
import {
  builtinCatalogue,
  type CallableTool,
  decodeArgumentsObject,
  DEFAULT_RETRY_POLICY,
  makeToolCatalogue,
  openWorkspace,
  parseTaskContract,
  type TaskContract,
  type ToolArguments,
  type ToolCatalogue,
  type ToolEffect,
  type ToolOutcome
} from '@agentvisor/core'
import { makeScriptedProvider, type ScriptedStep } from '@agentvisor/core/testing'
import { makeRunWriter, openStore, type RunWriter, type Store } from '@agentvisor/store'
import { DEFAULT_CIRCUIT_BREAKER, makeCircuitBreakers } from '../src/driver/circuit-breaker.js'
import { makeTreeBudgets } from '../src/driver/budget.js'
import { UsageTally } from '@agentvisor/core'
import { openingMessages, rebuildConversation, type StepRecord } from '../src/driver/conversation.js'
import { makeRunDriver } from '../src/driver/run-driver.js'
import { childRunRow } from '../src/protocol/child-contract.js'
import { loadRunPolicy } from '../src/approval/run-policy.js'
import { runMachine } from '../src/machine/run-machine.js'
import { decodeRunSnapshot } from '../src/machine/run-snapshot.js'
import { runCall } from '../../../test/support/run-call.js'

const stores: Store[] = []
/** The machine input every driver of these runs starts from (and a stored snapshot is read with). */
const MACHINE_INPUT = { maxSteps: 10, maxRetries: 2, dispatchCeiling: 50, providerCount: 1, timeoutMs: 60_000 }
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
})

/** A tool of the test's own, with the effect class under test: it counts its runs and may hold one open. */
const countingTool = (name: string, effect: ToolEffect, hold?: () => Effect.Effect<void>) => {
  const runs: string[] = []
  const tool: CallableTool<ToolArguments> = {
    name,
    source: 'module',
    spec: { name, description: `the test's ${name}`, parameters: { type: 'object', properties: { what: { type: 'string' } } } },
    effect,
    runsAs: 'call',
    decode: decodeArgumentsObject,
    // Judged like a command, so that the step's plan and a recovery request name it.
    policy: (fields) => (typeof fields['what'] === 'string' ? { act: 'exec', target: `${name} ${fields['what']}` } : undefined),
    run: (args, ctx) =>
      Effect.gen(function* () {
        runs.push(ctx.idempotencyKey)
        if (hold !== undefined && runs.length === 1) yield* hold()
        return { ok: true, output: `${name} did ${String(args['what'])}` } satisfies ToolOutcome
      })
  }
  return { tool, runs }
}

const catalogueOf = (...tools: ReadonlyArray<CallableTool<ToolArguments>>): ToolCatalogue =>
  Either.getOrThrow(makeToolCatalogue([...builtinCatalogue.tools, ...tools]))

const call = (name: string, what: string): ScriptedStep => ({ toolCalls: [{ name, arguments: { what } }] })

/** A run on a real SQLite store, driven by `makeRunDriver` the way the supervisor drives one. */
const openRun = async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'av-tool-effects-'))
  const store = await openStore(path.join(dir, 'av.db'))
  stores.push(store)
  const writer = makeRunWriter(store)
  const parsed = parseTaskContract(
    { goal: 'g', workspace: path.join(dir, 'ws'), approval: 'auto', providers: [{ name: 'primary', kind: 'scripted', steps: [] }] },
    dir
  )
  if (Either.isLeft(parsed)) throw parsed.left
  const contract: TaskContract = parsed.right
  const runId = 'run-1'
  const leaseToken = await runCall(
    writer.createRun(childRunRow(runId, null, contract, new Date().toISOString()), { owner: 'test', expiresAt: Date.now() + 60_000 })
  )
  const sqlite = store.sqlite!
  return {
    dir,
    runId,
    /** One driver of the run from where the store has it (a new run, or a resume after a crash). */
    driver: async (writerOf: RunWriter, steps: ReadonlyArray<ScriptedStep>, tools: ToolCatalogue) => {
      const loaded = (await runCall(writerOf.loadRun(runId)))!
      const snapshot = loaded.last === undefined ? undefined : (Either.getOrThrow(decodeRunSnapshot(loaded.last.snapshot_json, MACHINE_INPUT)) as never)
      const records = loaded.steps.map(
        (row): StepRecord => ({
          text: row.text,
          toolCalls: row.tool_calls,
          results: row.results ?? undefined
        })
      )
      const policy = await Effect.runPromise(loadRunPolicy(store.db, contract))
      if (Either.isLeft(policy)) throw new Error(policy.left)
      const actor = createActor(runMachine, {
        input: MACHINE_INPUT,
        ...(snapshot === undefined ? {} : { snapshot })
      }).start()
      return makeRunDriver({
        db: store.db,
        writer: writerOf,
        runId,
        contract,
        providers: [makeScriptedProvider({ name: 'primary', steps })],
        workspace: await Effect.runPromise(openWorkspace(contract.workspace)),
        actor,
        messages: records.length === 0 ? openingMessages(contract) : rebuildConversation(contract, records),
        seq: loaded.last?.seq ?? 0,
        observers: [],
        retryPolicy: DEFAULT_RETRY_POLICY,
        deadline: Date.now() + 60_000,
        attemptTimeoutMs: 10_000,
        breakers: makeCircuitBreakers(DEFAULT_CIRCUIT_BREAKER),
        budgets: makeTreeBudgets(),
        usage: new UsageTally(false),
        policy: policy.right,
        newId: () => crypto.randomUUID(),
        leaseToken,
        tools
      })
    },
    writer,
    effects: () =>
      sqlite.prepare('SELECT step, position, name, status FROM tool_effects WHERE run_id = ? ORDER BY step, position').all(runId) as Array<{
        step: number
        position: number
        name: string
        status: string
      }>,
    run: () => sqlite.prepare('SELECT status, state FROM runs WHERE id = ?').get(runId) as { status: string; state: string },
    recoveries: () => sqlite.prepare("SELECT act, target, status FROM approvals WHERE run_id = ? AND kind = 'recovery'").all(runId),
    results: () =>
      (sqlite.prepare('SELECT results_json FROM steps WHERE run_id = ? ORDER BY step').all(runId) as Array<{ results_json: string | null }>).map((row) =>
        row.results_json === null ? null : (JSON.parse(row.results_json) as Array<{ output: string }>).map((r) => r.output)
      ),
    /** Waits until the journal has a started call, the moment the test's "crash" happens. */
    started: async () => {
      for (let i = 0; i < 400; i++) {
        if ((sqlite.prepare("SELECT 1 FROM tool_effects WHERE run_id = ? AND status = 'started'").all(runId) as unknown[]).length > 0) return
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      throw new Error('no call ever started')
    }
  }
}

/** Starts a run whose first call holds until it is interrupted, then stops it there, as a crash would. */
const crashDuring = async (effect: ToolEffect) => {
  const held = await Effect.runPromise(Deferred.make<void>())
  const probe = countingTool('probe', effect, () => Deferred.await(held))
  const run = await openRun()
  const tools = catalogueOf(probe.tool)
  const first = await run.driver(run.writer, [call('probe', 'it')], tools)
  const fiber = Effect.runFork(first.drive)
  await run.started()
  // The driver dies with the call in flight: nothing after `started` reaches the store.
  await Effect.runPromise(Fiber.interrupt(fiber))
  expect(run.effects()).toEqual([{ step: 1, position: 0, name: 'probe', status: 'started' }])
  const resumed = await run.driver(run.writer, [{ text: 'done' }], tools)
  await Effect.runPromise(resumed.recover)
  await Effect.runPromise(resumed.drive)
  return { run, probe }
}

describe('the tool journal reads the effect class from the tool definition', () => {
  it('journals every call of an idempotent or effect tool and none of a read tool, and stages a step that only reads', async () => {
    const look = countingTool('look', 'read')
    const stamp = countingTool('stamp', 'idempotent')
    const launch = countingTool('launch', 'effect')
    const run = await openRun()
    // Which transitions went to the store together, one entry per commit.
    const commits: string[][] = []
    const writer: RunWriter = {
      ...run.writer,
      commit: (commit, options) => {
        commits.push(commit.transitions.map((t) => `${t.from}>${t.to}`))
        return run.writer.commit(commit, options)
      }
    }
    const driver = await run.driver(
      writer,
      [
        call('look', 'around'),
        {
          toolCalls: [
            { name: 'stamp', arguments: { what: 'a' } },
            { name: 'launch', arguments: { what: 'b' } }
          ]
        },
        { text: 'done' }
      ],
      catalogueOf(look.tool, stamp.tool, launch.tool)
    )
    await Effect.runPromise(driver.drive)
    expect(run.run()).toEqual({ status: 'succeeded', state: 'finished.succeeded' })
    expect(run.effects()).toEqual([
      { step: 2, position: 0, name: 'stamp', status: 'completed' },
      { step: 2, position: 1, name: 'launch', status: 'completed' }
    ])
    expect(run.results()).toEqual([['look did around'], ['stamp did a', 'launch did b'], null])
    expect([look.runs, stamp.runs, launch.runs]).toEqual([['run-1:1:0'], ['run-1:2:0'], ['run-1:2:1']])
    // The reading step went to the store in one commit with the next dispatch; the step with
    // effects made its reply durable before its tools ran.
    const intoActing = commits.filter((c) => c.includes('dispatching>acting'))
    expect(intoActing).toHaveLength(2)
    expect(intoActing[0]).toEqual(['dispatching>acting', 'acting>verifying', 'verifying>dispatching'])
    expect(intoActing[1]).toEqual(['dispatching>acting'])
  })

  it('runs an interrupted idempotent call again on resume, with the same idempotency key', async () => {
    const { run, probe } = await crashDuring('idempotent')
    expect(probe.runs).toEqual(['run-1:1:0', 'run-1:1:0'])
    expect(run.effects()).toEqual([{ step: 1, position: 0, name: 'probe', status: 'completed' }])
    expect(run.recoveries()).toEqual([])
    expect(run.run()).toEqual({ status: 'succeeded', state: 'finished.succeeded' })
    expect(run.results()[0]).toEqual(['probe did it'])
  })

  it('pauses an interrupted effect call for a recovery decision on resume instead of running it again', async () => {
    const { run, probe } = await crashDuring('effect')
    expect(probe.runs).toEqual(['run-1:1:0'])
    expect(run.run()).toEqual({ status: 'awaiting_approval', state: 'awaitingApproval' })
    expect(run.recoveries()).toEqual([{ act: 'exec', target: 'probe it', status: 'pending' }])
    expect(run.effects()).toEqual([{ step: 1, position: 0, name: 'probe', status: 'started' }])
  })

  it('keeps a read call out of the journal even when it is interrupted, and simply runs it again', async () => {
    const held = await Effect.runPromise(Deferred.make<void>())
    const probe = countingTool('probe', 'read', () => Deferred.await(held))
    const run = await openRun()
    const tools = catalogueOf(probe.tool)
    const fiber = Effect.runFork((await run.driver(run.writer, [call('probe', 'it')], tools)).drive)
    for (let i = 0; i < 400 && probe.runs.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
    await Effect.runPromise(Fiber.interrupt(fiber))
    expect(run.effects()).toEqual([])
    const resumed = await run.driver(run.writer, [call('probe', 'it'), { text: 'done' }], tools)
    await Effect.runPromise(resumed.recover)
    await Effect.runPromise(resumed.drive)
    expect(run.run()).toEqual({ status: 'succeeded', state: 'finished.succeeded' })
    expect(run.effects()).toEqual([])
    expect(probe.runs).toHaveLength(2)
  })

  it('answers a call of a tool the catalogue does not have with the tools it has, and journals nothing', async () => {
    const run = await openRun()
    const driver = await run.driver(run.writer, [call('teleport', 'x'), { text: 'done' }], catalogueOf(countingTool('lookup', 'effect').tool))
    await Effect.runPromise(driver.drive)
    expect(run.results()[0]).toEqual(['Unknown tool "teleport". Available tools: read_file, write_file, list_dir, exec, lookup'])
    expect(run.effects()).toEqual([])
  })
})
