import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { decodeArgumentsObject, type RunError, type TaskContract } from '@agentvisor/core'
import { type Executor, openStore, type PolicyEventRow } from '@agentvisor/store'
import { Effect, Either } from 'effect'
import { isInside } from '../protocol/child-contract.js'
import { FollowUpRefusedError } from '../errors.js'
import type { Approver } from '../driver/drive.js'
import type { RegisteredTool } from '../driver/run-tools.js'
import type { RunResult } from '../supervisor/run-handle.js'
import type { SupervisorOptions } from '../supervisor/supervisor-options.js'
import { type Departure, firstDeparture, goesOn, type ReplayedTurn, uncompared } from './compare.js'
import { RECORDED_PROVIDER, type ReplayStop, recordedProvider } from './recorded-provider.js'
import { loadRecording, type Recording } from './recording.js'

/** How a replay is made (docs/replay.md). */
export interface ReplayOptions {
  /**
   * Today's task, validated (`Agentvisor.contract`): its policy, tools, tool modules, MCP servers,
   * verification, instructions and limits replace the stored contract's. The goal and the
   * providers are the record's. Default: the stored contract, with today's code and tools.
   */
  readonly task?: TaskContract | undefined
  /** The folder the scratch workspace starts as a copy of (default: the run's workspace as it is now). */
  readonly workspace?: string | undefined
  /** Keep the scratch store and workspace, and name them in the report (default: removed). */
  readonly keep?: boolean | undefined
}

/** What a replay found (docs/replay.md, "The report"). */
export interface ReplayReport {
  /** The stored run replayed. */
  readonly runId: string
  /** The replay's own run, in the scratch store. */
  readonly replayRunId: string
  /** No departure: every step compared went the same way. */
  readonly identical: boolean
  readonly steps: { readonly recorded: number; readonly replayed: number }
  readonly recorded: { readonly status: string; readonly error?: RunError }
  readonly replayed: { readonly status: string; readonly error?: RunError }
  /** The first place the replay went another way than the record. */
  readonly departure?: Departure
  /** Why the end (or a part) of the run was not compared, when it was not. */
  readonly notCompared?: string
  /** Where the scratch store and workspace are, when kept. */
  readonly scratch?: { readonly db: string; readonly workspace: string }
}

/**
 * The part of a started run a replay reads (`StartedRun`). A replay declares the parts of the
 * `Agentvisor` it drives rather than importing them: the API sits above it (docs/architecture.md).
 */
interface ScratchRun {
  readonly runId: string
  readonly result: Promise<RunResult>
  readonly cancel: () => Promise<void>
}

/** The part of an `Agentvisor` a replay drives its scratch run with. */
export interface ScratchAgentvisor {
  readonly start: (contract: TaskContract, options: { readonly approver: Approver }) => Promise<ScratchRun>
  /** Begins the replay's next turn with the record's follow-up message (`Agentvisor.send`). */
  readonly send: (runId: string, text: string, options: { readonly approver: Approver }) => Promise<ScratchRun>
  readonly close: () => Promise<void>
}

/** What the scratch `Agentvisor` is opened with (a part of `AgentvisorOptions`). */
interface ScratchOptions extends Pick<SupervisorOptions, 'makeProvider' | 'tools' | 'env'> {
  /** The scratch store's SQLite file. */
  readonly db: string
}

/** Opens the scratch store's `Agentvisor` (`Agentvisor.open`; passed in so this module does not import the class). */
export type OpenScratch = (options: ScratchOptions) => Promise<ScratchAgentvisor>

/** Settings of the process that asks for the replay, carried to the scratch one. */
export interface ReplayHost {
  readonly tools?: ReadonlyArray<RegisteredTool> | undefined
  readonly env?: NodeJS.ProcessEnv | undefined
}

const keyOf = (step: number, act: string, target: string): string => `${step}\n${act}\n${target}`

/**
 * Answers the replay's `ask`s as the record's people did, in order (docs/replay.md): the same
 * decision, with the same edits, for the same step, act and target; a question with the recorded
 * answer. An ask the record never had is denied (the policy comparison names it).
 */
const recordedApprover = (recording: Recording): Approver => {
  const decisions = new Map<string, PolicyEventRow[]>()
  for (const event of recording.policyEvents) {
    if (event.kind !== 'decision') continue
    const key = keyOf(event.step, event.act, event.target)
    decisions.set(key, [...(decisions.get(key) ?? []), event])
  }
  const questions = recording.approvals.filter((row) => row.kind === 'input' && row.account !== null)
  return {
    source: 'api',
    decide: async (request) => {
      const decided = decisions.get(keyOf(request.step, request.act, request.target))?.shift()
      if (decided?.decision !== 'approved') return { decision: 'deny' }
      const row = recording.approvals.find((a) => a.id === decided.request_id)
      const edited = row?.edited_payload?.arguments
      return edited === undefined ? { decision: 'approve' } : { decision: 'approve', edit: JSON.parse(edited) as Record<string, unknown> }
    },
    answer: async (question) => {
      const index = questions.findIndex((row) => row.step === question.step && row.target === question.question)
      if (index === -1) return undefined
      return questions.splice(index, 1)[0]!.account ?? undefined
    }
  }
}

/**
 * Takes the record's `write_file`s back in a copy of the run's workspace as it is now
 * (docs/replay.md, "The scratch workspace"): a file the run wrote is put back as the run first
 * read it, or removed when it never read it before writing. What commands and other tools did is
 * not known, so it is not taken back.
 */
const rewindWrites = (workspace: string, recording: Recording): void => {
  const before = new Map<string, string | undefined>()
  for (const step of recording.steps) {
    step.tool_calls.forEach((call, i) => {
      const args = decodeArgumentsObject(call.arguments)
      if (Either.isLeft(args) || typeof args.right['path'] !== 'string') return
      // A file below the workspace, never the workspace itself or a path that leaves it.
      const file = path.resolve(workspace, args.right['path'])
      if (file === workspace || !isInside(workspace, file) || before.has(file)) return
      const result = step.results?.[i]
      if (call.name === 'read_file' && result?.ok === true) before.set(file, result.output)
      if (call.name === 'write_file' && result?.ok === true) before.set(file, undefined)
    })
  }
  for (const [file, content] of before) {
    if (content === undefined) rmSync(file, { force: true })
    else writeFileSync(file, content)
  }
}

/** The contract the replay runs: today's task or the stored one, on the scratch workspace, answered by the record. */
const replayContract = (recording: Recording, workspace: string, today: TaskContract | undefined): TaskContract => {
  // Set by agentvisor on the runs it stores: the replay's own run gets its own.
  const { lineage: _lineage, startedWithTools: _tools, ...base } = today ?? recording.contract
  return {
    ...base,
    goal: recording.contract.goal,
    workspace,
    providers: [{ name: RECORDED_PROVIDER, kind: 'scripted', steps: [] }],
    // People's decisions come from the record; `auto` stays `auto`.
    approval: base.approval === 'auto' ? 'auto' : 'prompt'
  }
}

/** Reads a run's record from a store opened for the purpose. */
const recordingIn = async (db: string, runId: string): Promise<Recording> => {
  const store = await openStore(db, { readOnly: true })
  try {
    return await Effect.runPromise(loadRecording(store.db as Executor, runId, { endedOnly: false }))
  } finally {
    await store.close()
  }
}

/**
 * Re-drives a recorded run from its start in a scratch workspace and a scratch store, with a
 * provider that plays the record's answers, today's code, policy and tools (docs/replay.md), and
 * compares what happened with the record. The original's workspace and store are only read.
 */
export const replayRecording = async (recording: Recording, open: OpenScratch, options: ReplayOptions = {}, host: ReplayHost = {}): Promise<ReplayReport> => {
  const scratch = mkdtempSync(path.join(tmpdir(), 'agentvisor-replay-'))
  const workspace = path.join(scratch, 'workspace')
  const db = path.join(scratch, 'replay.db')
  try {
    const from = options.workspace ?? recording.contract.workspace
    if (existsSync(from)) cpSync(from, workspace, { recursive: true, verbatimSymlinks: true })
    else mkdirSync(workspace)
    // The run's own workspace is as the run left it: its writes are taken back first.
    if (options.workspace === undefined) rewindWrites(workspace, recording)
    let stop: ReplayStop | undefined
    let stopped: () => void = () => {}
    const provider = recordedProvider(recording.steps, (why) => {
      stop = why
      stopped()
    })
    const av = await open({
      db,
      makeProvider: () => provider,
      ...(host.tools !== undefined ? { tools: host.tools } : {}),
      ...(host.env !== undefined ? { env: host.env } : {})
    })
    const approver = recordedApprover(recording)
    const played: ReplayedTurn[] = []
    let replayRunId = ''
    try {
      // Every turn, each begun as the record's was: the first by the goal, each next one by its
      // follow-up message, sent where the record's turn before it ended (docs/replay.md, "Turns").
      for (const [i, turn] of recording.turns.entries()) {
        if (i > 0 && !goesOn(recording.turns[i - 1]!, played[i - 1]!)) break
        stop = undefined
        const stopping = new Promise<void>((resolve) => (stopped = resolve))
        provider.playThrough(turn.lastStep)
        let run: ScratchRun
        try {
          run =
            i === 0
              ? await av.start(replayContract(recording, workspace, options.task), { approver })
              : await av.send(replayRunId, turn.message ?? '', { approver })
        } catch (error) {
          // Only a follow-up can be refused here (the replay's run did not end its turn as the record's did).
          if (i === 0 || !(error instanceof FollowUpRefusedError)) throw error
          break
        }
        replayRunId = run.runId
        // The record has no answer to give: the run is cancelled where it waits for one.
        void stopping.then(() => run.cancel())
        const result = await run.result
        // Set by the provider's callback meanwhile, which the compiler does not see.
        played.push({ status: result.status, steps: result.steps, stop: stop as ReplayStop | undefined })
      }
    } finally {
      await av.close()
    }
    const replay = await recordingIn(db, replayRunId)
    const departure = firstDeparture(recording, replay, played)
    const notCompared = departure === undefined ? uncompared(recording, played) : undefined
    return {
      runId: recording.runId,
      replayRunId,
      identical: departure === undefined,
      steps: { recorded: recording.steps.length, replayed: replay.steps.length },
      recorded: { status: recording.status, ...(recording.error !== undefined ? { error: recording.error } : {}) },
      replayed: { status: replay.status, ...(replay.error !== undefined ? { error: replay.error } : {}) },
      ...(departure !== undefined ? { departure } : {}),
      ...(notCompared !== undefined ? { notCompared } : {}),
      ...(options.keep === true ? { scratch: { db, workspace } } : {})
    }
  } finally {
    if (options.keep !== true) rmSync(scratch, { recursive: true, force: true })
  }
}
