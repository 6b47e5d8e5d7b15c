import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Agentvisor, type AgentvisorOptions, loadRunTrace, type RunTrace } from '@agentvisor/actors'
import type { ScriptedStep, TaskInput } from '@agentvisor/core'
import { openStore } from '@agentvisor/store'
import { Effect } from 'effect'
import { afterEach } from 'vitest'

/**
 * Runs of the TypeScript API against scripted providers (docs/task-file.md, "Providers"), each
 * test in a folder of its own: the store is `av.db` in it, the workspace `ws`. Every Agentvisor
 * a test opens is closed after it (closing twice is a no-op, so a test may close one itself).
 */
export interface ScriptedRuns {
  /** A fresh temporary folder for one test. */
  readonly folder: () => string
  /** An Agentvisor on the folder's store, with the file's defaults under `options`. */
  readonly open: (dir: string, options?: Omit<AgentvisorOptions, 'db'>) => Promise<Agentvisor>
  /**
   * The task the tests run: goal `g` in the folder's `ws`, approvals on `auto`, one scripted
   * provider `primary` playing `steps` (or one provider per name, in order); `overrides` replace
   * any field.
   */
  readonly task: (dir: string, steps: Steps | Readonly<Record<string, Steps>>, overrides?: Partial<TaskInput>) => TaskInput
  /** The run's trace as `agentvisor show --json` gives it, read from the folder's store. */
  readonly trace: (dir: string, runId: string) => Promise<RunTrace>
}

type Steps = ReadonlyArray<ScriptedStep>

/** Called once at the top of a test file; `defaults` go to every `open`. */
export const scriptedRunsPerTest = (defaults: Omit<AgentvisorOptions, 'db'> = {}): ScriptedRuns => {
  const opened: Agentvisor[] = []
  afterEach(async () => {
    for (const av of opened.splice(0)) await av.close()
  })
  return {
    folder: () => mkdtempSync(path.join(tmpdir(), 'av-scripted-')),
    open: async (dir, options = {}) => {
      const av = await Agentvisor.open({ ...defaults, ...options, db: path.join(dir, 'av.db') })
      opened.push(av)
      return av
    },
    task: (dir, steps, overrides = {}) => ({
      goal: 'g',
      workspace: path.join(dir, 'ws'),
      approval: 'auto',
      providers: Object.entries(isSteps(steps) ? { primary: steps } : steps).map(([name, played]) => ({ name, kind: 'scripted', steps: [...played] })),
      ...overrides
    }),
    trace: async (dir, runId) => {
      const store = await openStore(path.join(dir, 'av.db'))
      try {
        const trace = await Effect.runPromise(loadRunTrace(store.db, runId))
        if (trace === undefined) throw new Error(`no run ${runId} in ${dir}`)
        return trace
      } finally {
        await store.close()
      }
    }
  }
}

const isSteps = (steps: Steps | Readonly<Record<string, Steps>>): steps is Steps => Array.isArray(steps)

/** A step that writes `content` into `file` of the workspace. */
export const writeStep = (file: string, content: string): ScriptedStep => ({ toolCalls: [{ name: 'write_file', arguments: { path: file, content } }] })
