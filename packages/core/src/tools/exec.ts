import { type ChildProcessByStdio, spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import type { Readable } from 'node:stream'
import { Effect, Either } from 'effect'
import type { CommandSandbox } from '../contract/contract-fields.js'
import { ProcessGroupError } from '../errors.js'
import { shellLaunch } from './sandbox.js'

/** How a shell command ended and what it printed. */
export interface CommandResult {
  /** The shell's exit code; null when it was ended by a signal or could not be started. */
  readonly exitCode: number | null
  /** The signal that ended the shell (`SIGTERM`, `SIGKILL`), if any. */
  readonly signal: string | null
  readonly stdout: string
  readonly stderr: string
  /** The deadline passed and the process group was killed. */
  readonly timedOut: boolean
  /** At least one stream printed more than `maxOutputBytes`; the excess was dropped. */
  readonly truncated: boolean
}

export interface RunCommandOptions {
  /** A `/bin/sh -c` command line. */
  readonly command: string
  readonly cwd: string
  /** After this long the whole process group is terminated and `timedOut` is set. */
  readonly timeoutMs: number
  /** Cap on captured bytes per stream; 64 KiB when omitted. */
  readonly maxOutputBytes?: number | undefined
  /** The child's environment; the parent's when omitted. */
  readonly env?: NodeJS.ProcessEnv | undefined
  /** How long the group gets between SIGTERM and SIGKILL; 2000 ms when omitted. */
  readonly killGraceMs?: number | undefined
  /** Runs the shell under bubblewrap, `cwd` its only writable folder besides a private /tmp (docs/task-file.md, "sandbox"). */
  readonly sandbox?: CommandSandbox | undefined
}

const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024
const DEFAULT_KILL_GRACE_MS = 2_000
const POLL_MS = 20
/** Once the group is gone, how long to wait for pipes held open by a process that left the group. */
const DRAIN_MS = 1_000

/**
 * Members of a process group that have not terminated, read from `/proc` where it exists.
 * A zombie counts as gone: it runs nothing, and under a PID 1 that does not reap orphans (many
 * containers) it would otherwise keep a killed group "alive" forever.
 */
const liveMembersFromProc = (pgid: number): boolean | undefined => {
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return undefined
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    let stat: string
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
    } catch {
      continue // exited while we were looking
    }
    // `pid (comm) state ppid pgrp ...`; comm may itself contain spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const state = fields[0]
    if (Number(fields[2]) === pgid && state !== 'Z' && state !== 'X') return true
  }
  return false
}

/**
 * Whether any process of the group `pgid` is still running (`process.kill(-pgid, 0)`, refined
 * through `/proc` on Linux so that unreaped zombies do not count).
 */
export const processGroupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch (error) {
    // EPERM means the group exists but belongs to someone else: it is alive.
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
  return liveMembersFromProc(pgid) ?? true
}

const signalGroup = (pgid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // ESRCH: the group is already gone, which is what we wanted.
  }
}

const sleep = (ms: number, options: { readonly unref?: boolean } = {}) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms)
    // A drain wait that loses its race must not keep the host process alive.
    if (options.unref === true) timer.unref()
  })

const waitGroupGone = async (pgid: number, withinMs: number): Promise<boolean> => {
  const deadline = Date.now() + withinMs
  while (processGroupAlive(pgid)) {
    if (Date.now() >= deadline) return false
    await sleep(POLL_MS)
  }
  return true
}

/**
 * SIGTERM to the whole group, SIGKILL after the grace period if anything survives, and only
 * then resolves. SIGKILL cannot be ignored, so the final wait ends as soon as the kernel has
 * torn the processes down.
 */
const terminateGroup = async (pgid: number, graceMs: number): Promise<void> => {
  if (!processGroupAlive(pgid)) return
  signalGroup(pgid, 'SIGTERM')
  if (await waitGroupGone(pgid, graceMs)) return
  // Repeated in case a process forked into the group between the two checks.
  while (processGroupAlive(pgid)) {
    signalGroup(pgid, 'SIGKILL')
    await sleep(POLL_MS)
  }
}

/** What a command wrote on one of its pipes, as much of it as is kept. */
interface OutputCapture {
  readonly push: (chunk: Buffer) => void
  readonly text: () => string
  /** More was written than kept. */
  readonly truncated: boolean
}

/** Keeps the first `max` bytes of a stream and keeps draining the rest, so the child never blocks on a full pipe. */
const capture = (max: number): OutputCapture => {
  const chunks: Buffer[] = []
  let size = 0
  let truncated = false
  return {
    push: (chunk: Buffer) => {
      const room = max - size
      if (chunk.length > room) truncated = true
      if (room <= 0) return
      const kept = chunk.length > room ? chunk.subarray(0, room) : chunk
      chunks.push(kept)
      size += kept.length
    },
    text: () => Buffer.concat(chunks).toString('utf8'),
    get truncated() {
      return truncated
    }
  }
}

const notStarted = (error: unknown): CommandResult => ({
  exitCode: null,
  signal: null,
  stdout: '',
  stderr: `Cannot start command: ${error instanceof Error ? error.message : String(error)}`,
  timedOut: false,
  truncated: false
})

/** The shell of `options.command` spawned as the leader of a new process group; what it says when it cannot start. */
const spawnShell = (options: RunCommandOptions): Either.Either<ChildProcessByStdio<null, Readable, Readable>, CommandResult> => {
  const launch = shellLaunch(options.command, options.cwd, options.sandbox)
  // Failing closed: a command the task wants confined never runs unconfined.
  if (Either.isLeft(launch)) return Either.left(notStarted(launch.left))
  try {
    return Either.right(
      spawn(launch.right.file, launch.right.args, {
        cwd: options.cwd,
        env: options.env ?? process.env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe']
      })
    )
  } catch (error) {
    // Arguments Node rejects up front (a NUL byte in the command, say) never reach a process.
    return Either.left(notStarted(error))
  }
}

/**
 * Runs `/bin/sh -c command` as the leader of a new process group, with stdin closed; with
 * `sandbox`, bwrap leads the group and the shell runs inside it, in the same group.
 *
 * On timeout, on Effect interruption, and when the shell exits leaving background jobs behind,
 * the whole group gets SIGTERM, then SIGKILL after `killGraceMs`. Interruption completes only
 * once the group is gone, so after `Fiber.interrupt` returns nothing the command started is
 * still running (a process that deliberately leaves the group, e.g. with `setsid`, is out of
 * reach). Never fails: a command that cannot start is reported with a null exit code and the
 * reason on stderr.
 *
 * @example
 * const result = yield* runCommand({ command: 'npm test', cwd: ws.root, timeoutMs: 120_000 })
 */
export const runCommand = (options: RunCommandOptions): Effect.Effect<CommandResult> =>
  Effect.async<CommandResult>((resume) => {
    const maxBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES
    const graceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS
    const stdout = capture(maxBytes)
    const stderr = capture(maxBytes)
    let timedOut = false
    let finished = false

    const spawned = spawnShell(options)
    if (Either.isLeft(spawned)) {
      resume(Effect.succeed(spawned.left))
      return
    }
    const child = spawned.right
    const pgid = child.pid
    child.stdout.on('data', stdout.push)
    child.stderr.on('data', stderr.push)
    const closed = new Promise<void>((resolve) => child.once('close', () => resolve()))

    const finish = (exitCode: number | null, signal: string | null, extraStderr = '') => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      child.stdout.destroy()
      child.stderr.destroy()
      resume(
        Effect.succeed({
          exitCode,
          signal,
          stdout: stdout.text(),
          stderr: stderr.text() + extraStderr,
          timedOut,
          truncated: stdout.truncated || stderr.truncated
        })
      )
    }

    const timer = setTimeout(() => {
      timedOut = true
      if (pgid !== undefined) void terminateGroup(pgid, graceMs)
    }, options.timeoutMs)

    child.once('error', (error) => {
      // Spawning failed (bad cwd, no /bin/sh): there is no process to wait for.
      if (pgid === undefined) finish(null, null, notStarted(error).stderr)
    })

    child.once('exit', (code, signal) => {
      // The command is over; cleaning up its leftovers must not be mistaken for a timeout.
      clearTimeout(timer)
      void (async () => {
        // Background jobs left behind by the shell are part of this call: they go with it.
        if (pgid !== undefined) await terminateGroup(pgid, graceMs)
        await Promise.race([closed, sleep(DRAIN_MS, { unref: true })])
        finish(code, signal)
      })()
    })

    // Interrupted: the group goes before the interruption completes. Its steps catch their own
    // errors, so this cannot fail; if it ever did, it is said once and the interruption goes on.
    return Effect.tryPromise({
      try: async () => {
        finished = true
        clearTimeout(timer)
        if (pgid !== undefined) await terminateGroup(pgid, graceMs)
        child.stdout.destroy()
        child.stderr.destroy()
      },
      catch: (cause) => new ProcessGroupError({ pgid, cause })
    }).pipe(Effect.catchAll((error) => Effect.logWarning(error.message)))
  })
