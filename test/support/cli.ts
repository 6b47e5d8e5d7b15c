import { spawnTethered } from '@agentvisor/cli'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'

/** The built `agentvisor` bin (the test script builds before vitest runs). */
export const BIN = fileURLToPath(new URL('../../packages/cli/bin/agentvisor.js', import.meta.url))

export interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs the real CLI in a child process, which ends with the test process even if that is killed. */
export const runCli = (
  args: ReadonlyArray<string>,
  options: { cwd?: string; env?: NodeJS.ProcessEnv; onSpawn?: (pid: number) => void; onStderr?: (text: string) => void } = {}
): Promise<CliResult> =>
  new Promise((resolve, reject) => {
    const child = spawnTethered(process.execPath, [BIN, ...args], {
      cwd: options.cwd ?? process.cwd(),
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      watchesTether: true
    })
    let stdout = ''
    let stderr = ''
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString()
      options.onStderr?.(stderr)
    })
    child.once('error', reject)
    if (child.pid !== undefined) options.onSpawn?.(child.pid)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })

/** The last stdout line parsed as JSON (the `--json` contract). */
export const lastJson = <T = Record<string, unknown>>(result: CliResult): T => {
  const lines = result.stdout.trim().split('\n')
  return JSON.parse(lines[lines.length - 1]!) as T
}

/** A fresh temporary folder. */
export const tempDir = (prefix = 'agentvisor-test-'): string => mkdtempSync(path.join(tmpdir(), prefix))

/** Writes a task file into `dir` and returns its path. */
export const writeTask = (dir: string, task: unknown, name = 'task.json'): string => {
  const file = path.join(dir, name)
  writeFileSync(file, typeof task === 'string' ? task : JSON.stringify(task, null, 2))
  return file
}

/** A fresh folder holding `task` as `task.json`, and the path of a store in it: where a CLI run test starts. */
export const taskInTempDir = (task: unknown): { readonly dir: string; readonly db: string; readonly task: string } => {
  const dir = tempDir()
  return { dir, db: path.join(dir, 'av.db'), task: writeTask(dir, task) }
}

/**
 * The usual task against the mock LLM (model `m`): write DONE into `ws/out.txt`, verified, with
 * approvals on `auto`; `overrides` replace any field.
 */
export const mockTask = (baseUrl: string, overrides: Record<string, unknown> = {}, provider = 'p'): Record<string, unknown> => ({
  goal: 'Write DONE into out.txt',
  workspace: 'ws',
  providers: [{ name: provider, kind: 'openai', baseUrl, model: 'm' }],
  verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
  limits: { maxSteps: 5, timeoutMs: 60_000 },
  approval: 'auto',
  ...overrides
})

/**
 * A fresh folder (or `dir`) holding `task.json` against the mock LLM at `baseUrl` (provider
 * `primary`, model `m`): write DONE into `ws/out.txt`, verified; `overrides` replace any field
 * (approvals, policy, limits: each test file says its own). With the paths a test reads.
 */
export const mockTaskFolder = (baseUrl: string, overrides: Record<string, unknown> = {}, dir = tempDir()) => ({
  dir,
  file: writeTask(dir, {
    goal: 'Write DONE into out.txt',
    workspace: 'ws',
    providers: [{ name: 'primary', kind: 'openai', baseUrl, model: 'm' }],
    verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
    ...overrides
  }),
  db: path.join(dir, 'av.db'),
  ws: path.join(dir, 'ws')
})

/** Polls `check` until it returns a value (not undefined), failing after `timeoutMs`. */
export const waitFor = async <T>(check: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 120_000): Promise<T> => {
  const until = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

/**
 * Starts `agentvisor run FILE --json --db DB` in the background: its result when it ends, its
 * pid, and its run id once it announces it (a test that kills it needs both).
 */
export const startRunInBackground = (file: string, db: string, env?: NodeJS.ProcessEnv) => {
  let runId: string | undefined
  let pid = 0
  const done = runCli(['run', file, '--json', '--db', db], {
    ...(env !== undefined ? { env } : {}),
    onSpawn: (p) => (pid = p),
    onStderr: (text) => (runId ??= /run (\S+) started/.exec(text)?.[1])
  })
  return { done, pid: () => pid, runId: () => waitFor(() => runId, 'the run id') }
}
