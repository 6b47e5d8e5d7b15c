import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect, Fiber } from 'effect'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { processGroupAlive, runCommand } from '@agentvisor/core'

let dir: string
const started: number[] = []

beforeEach(() => {
  dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-exec-')))
})

afterEach(() => {
  // Safety net only: a failing test must not leave sleeps behind for the next one.
  for (const pgid of started.splice(0)) {
    try {
      process.kill(-pgid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  rmSync(dir, { recursive: true, force: true })
})

/** Waits (as a safety net, not a timing assertion) for the command to report its process group id. */
const pgidOf = async (pidFile: string): Promise<number> => {
  for (;;) {
    if (existsSync(pidFile)) {
      const text = readFileSync(pidFile, 'utf8').trim()
      if (text !== '') {
        const pgid = Number(text)
        started.push(pgid)
        return pgid
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

// `$$` is the shell's pid, which leads the command's process group; the pid file is written
// after the background sleep has been started, so the group has two members at that point.
const twoSleeps = (pidFile: string, prelude = '') => `${prelude}sleep 30 & echo $$ > ${pidFile}; sleep 30; wait`

describe('runCommand', () => {
  it('reports the exit code and both streams of a command run in the given folder', async () => {
    const result = await Effect.runPromise(runCommand({ command: 'pwd; echo problem >&2; exit 3', cwd: dir, timeoutMs: 20_000 }))
    expect(result).toEqual({
      exitCode: 3,
      signal: null,
      stdout: `${dir}\n`,
      stderr: 'problem\n',
      timedOut: false,
      truncated: false
    })
  })

  it('closes stdin so a command waiting for input ends instead of hanging', async () => {
    const result = await Effect.runPromise(runCommand({ command: 'cat; echo after', cwd: dir, timeoutMs: 20_000 }))
    expect(result.timedOut).toBe(false)
    expect(result.exitCode).toBe(0)
    expect(result.stdout).toBe('after\n')
  })

  it('caps captured output per stream and marks the result truncated, while the command still completes', async () => {
    const result = await Effect.runPromise(
      runCommand({
        command: "head -c 300000 /dev/zero | tr '\\0' a; echo tail >&2",
        cwd: dir,
        timeoutMs: 20_000,
        maxOutputBytes: 1000
      })
    )
    expect(result.exitCode).toBe(0)
    expect(result.stdout).toBe('a'.repeat(1000))
    expect(result.stderr).toBe('tail\n')
    expect(result.truncated).toBe(true)
  })

  it('kills the whole process group on timeout, background jobs included', async () => {
    const pidFile = path.join(dir, 'pid')
    const fiber = Effect.runFork(runCommand({ command: twoSleeps(pidFile), cwd: dir, timeoutMs: 500 }))
    const pgid = await pgidOf(pidFile)
    expect(processGroupAlive(pgid)).toBe(true)
    const result = await Effect.runPromise(Fiber.join(fiber))
    expect(result.timedOut).toBe(true)
    expect(result.exitCode).toBeNull()
    expect(processGroupAlive(pgid)).toBe(false)
  })

  it('escalates to SIGKILL after the grace period when the group ignores SIGTERM', async () => {
    const pidFile = path.join(dir, 'pid')
    const fiber = Effect.runFork(runCommand({ command: twoSleeps(pidFile, "trap '' TERM; "), cwd: dir, timeoutMs: 300, killGraceMs: 200 }))
    const pgid = await pgidOf(pidFile)
    const result = await Effect.runPromise(Fiber.join(fiber))
    expect(result.timedOut).toBe(true)
    expect(result.signal).toBe('SIGKILL')
    expect(processGroupAlive(pgid)).toBe(false)
  })

  it('does not let Fiber.interrupt return before every process of the group is gone', async () => {
    const pidFile = path.join(dir, 'pid')
    const fiber = Effect.runFork(runCommand({ command: twoSleeps(pidFile), cwd: dir, timeoutMs: 60_000 }))
    const pgid = await pgidOf(pidFile)
    expect(processGroupAlive(pgid)).toBe(true)
    await Effect.runPromise(Fiber.interrupt(fiber))
    expect(processGroupAlive(pgid)).toBe(false)
  })

  it('still clears a SIGTERM-proof group before interruption completes', async () => {
    const pidFile = path.join(dir, 'pid')
    const fiber = Effect.runFork(runCommand({ command: twoSleeps(pidFile, "trap '' TERM; "), cwd: dir, timeoutMs: 60_000, killGraceMs: 200 }))
    const pgid = await pgidOf(pidFile)
    expect(processGroupAlive(pgid)).toBe(true)
    await Effect.runPromise(Fiber.interrupt(fiber))
    expect(processGroupAlive(pgid)).toBe(false)
  })

  it('kills background jobs the shell leaves behind when it exits normally', async () => {
    const pidFile = path.join(dir, 'pid')
    const result = await Effect.runPromise(runCommand({ command: `sleep 30 & echo $$ > ${pidFile}; echo started`, cwd: dir, timeoutMs: 20_000 }))
    const pgid = await pgidOf(pidFile)
    expect(result.exitCode).toBe(0)
    expect(result.timedOut).toBe(false)
    expect(result.stdout).toBe('started\n')
    expect(processGroupAlive(pgid)).toBe(false)
  })

  it('reports a command that cannot start as a result, never as a failure', async () => {
    const result = await Effect.runPromise(runCommand({ command: 'echo hi', cwd: path.join(dir, 'missing'), timeoutMs: 20_000 }))
    expect(result.exitCode).toBeNull()
    expect(result.stdout).toBe('')
    expect(result.stderr).toMatch(/^Cannot start command: /)
  })
})
