import { execFile } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import * as path from 'node:path'
import { Either } from 'effect'
import type { CommandSandbox } from '../contract/contract-fields.js'

/** How a command line is started: the program and its arguments. */
export interface ShellLaunch {
  readonly file: string
  readonly args: ReadonlyArray<string>
}

/**
 * Where `bwrap` is on the host's PATH, like `command -v bwrap`; undefined when it is not
 * installed. Relative PATH entries are skipped: they resolve against the command's folder, the
 * workspace, where the model could plant a `bwrap` of its own.
 */
export const findBwrap = (searchPath: string = process.env['PATH'] ?? ''): string | undefined => {
  for (const dir of searchPath.split(path.delimiter)) {
    if (!path.isAbsolute(dir)) continue
    const candidate = path.join(dir, 'bwrap')
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // Not in this folder.
    }
  }
  return undefined
}

const NOT_INSTALLED =
  'bwrap (bubblewrap) is not installed, and a task asking for sandbox.exec "bwrap" never runs commands unconfined (Debian/Ubuntu: apt-get install bubblewrap)'

/**
 * bubblewrap's options (docs/task-file.md, "sandbox"). Order matters: the private /tmp is
 * mounted before the workspace so that a workspace under /tmp is bound on top of it, not hidden.
 *
 * - `--unshare-pid`: the command sees only its own processes, so it cannot read agentvisor's
 *   environment (and the keys in it) through `/proc/<pid>/environ`; and when bwrap dies its
 *   namespace goes with it, even a process that left the group with `setsid`.
 * - `--cap-drop ALL`: run by root, bwrap otherwise leaves the command every capability, and a
 *   root command could simply remount `/` read-write.
 * - no `--new-session`: the command must stay in the process group that `runCommand` kills on
 *   cancel and timeout. It has no terminal to inject input into anyway: the group is started
 *   in a session of its own (`detached`), without a controlling terminal.
 */
const bwrapOptions = (sandbox: CommandSandbox, writable: string | undefined): string[] => [
  '--ro-bind',
  '/',
  '/',
  '--dev',
  '/dev',
  '--proc',
  '/proc',
  '--tmpfs',
  '/tmp',
  ...(writable === undefined ? [] : ['--bind', writable, writable, '--chdir', writable]),
  '--unshare-pid',
  ...(sandbox.network ? [] : ['--unshare-net']),
  '--die-with-parent',
  '--cap-drop',
  'ALL'
]

/**
 * How to run `/bin/sh -c command` in `cwd`: directly, or under bubblewrap with `cwd` the only
 * writable folder besides a private /tmp. Left: why a sandboxed command cannot start (bwrap is
 * not installed), so the caller reports it instead of running the command unconfined.
 */
export const shellLaunch = (command: string, cwd: string, sandbox: CommandSandbox | undefined): Either.Either<ShellLaunch, string> => {
  if (sandbox === undefined) return Either.right({ file: '/bin/sh', args: ['-c', command] })
  const bwrap = findBwrap()
  if (bwrap === undefined) return Either.left(NOT_INSTALLED)
  return Either.right({ file: bwrap, args: [...bwrapOptions(sandbox, cwd), '/bin/sh', '-c', command] })
}

/**
 * Why commands cannot be confined as `sandbox` asks on this host, or undefined when they can:
 * bwrap is missing, or it cannot create its namespaces here (a container that forbids them).
 * Checked when a run starts, so that such a task stops with exit 2 instead of a run whose every
 * command fails.
 */
export const sandboxUnavailable = (sandbox: CommandSandbox | undefined): Promise<string | undefined> => {
  if (sandbox === undefined) return Promise.resolve(undefined)
  const bwrap = findBwrap()
  if (bwrap === undefined) return Promise.resolve(NOT_INSTALLED)
  return new Promise((resolve) => {
    execFile(bwrap, [...bwrapOptions(sandbox, undefined), '/bin/true'], { timeout: 10_000 }, (error, _stdout, stderr) => {
      if (error === null) return resolve(undefined)
      const reason = String(stderr).trim().split('\n')[0] || error.message.split('\n')[0]
      resolve(`bwrap cannot confine commands on this host: ${reason}`)
    })
  })
}
