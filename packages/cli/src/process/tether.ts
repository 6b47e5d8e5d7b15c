import { type ChildProcess, type SpawnOptions, type StdioNull, type StdioPipe, spawn } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { Socket } from 'node:net'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The variable that tells an agentvisor process which file descriptor ties it to its parent
 * (docs/cli.md, "Ending with the parent"): when that pipe reaches end-of-file, which the kernel
 * makes happen however the parent ended, SIGKILL included, the process stops as on SIGTERM.
 */
export const EXIT_WITH_PARENT_ENV = 'AGENTVISOR_EXIT_WITH_PARENT'

/** The child's end of the tether: the first descriptor after stdin, stdout and stderr. */
const TETHER_FD = 3

/** How long a child that lost its parent may take to stop on SIGTERM before it is killed. */
const GRACE_MS = 10_000

/**
 * The stand-in for a program that cannot watch a tether itself. A plain JavaScript file beside
 * the bin, so it runs the same from the sources (the tests) and from the build: from both
 * `src/process/` and `dist/process/`, the package root is two folders up.
 */
const WATCHDOG = fileURLToPath(new URL('../../bin/tether-watchdog.js', import.meta.url))

type StdioEntry = StdioPipe | StdioNull | number

/** `spawn`'s options, less the ones the tether needs for itself. */
export interface TetheredSpawnOptions extends Omit<SpawnOptions, 'detached' | 'stdio' | 'shell'> {
  /** stdin, stdout and stderr (the tether takes the next descriptor); default all `'ignore'`. */
  readonly stdio?: StdioEntry | readonly [StdioEntry, StdioEntry, StdioEntry]
  /**
   * Whether the child watches the tether itself: an `agentvisor` command (it reads
   * `AGENTVISOR_EXIT_WITH_PARENT`), also through a launcher that execs it (`ip netns exec`).
   * Otherwise a small watchdog process starts the program in a process group of its own and
   * ends that group when the tether breaks.
   */
  readonly watchesTether?: boolean
}

/**
 * Spawns a long-lived child that ends with this process, however this process ends: SIGKILL
 * runs no handler, so the child learns of it from a pipe only this process holds (its end is
 * close-on-exec, so no other child inherits it), which the kernel closes when this process dies.
 * An `agentvisor` child then stops as on SIGTERM; any other program (nats-server, postgres, a
 * script) gets SIGTERM on its whole process group from the watchdog, then SIGKILL after 10 s.
 *
 * The watchdog passes SIGTERM, SIGINT, SIGQUIT and SIGHUP on to the program and exits as it
 * does (its code, or the same signal), so `child.kill()` and `child.once('exit')` work as if
 * the program were the child. A program that cannot be found is spawned directly, so Node's own
 * `error` event (ENOENT) reports it.
 *
 * @example
 * const nats = spawnTethered('nats-server', ['-a', '127.0.0.1', '-p', '4222', '-js'])
 * const worker = spawnTethered(process.execPath, [bin, 'worker', '--nats', url], { watchesTether: true, stdio: ['ignore', 'inherit', 'pipe'] })
 */
export const spawnTethered = (command: string, args: ReadonlyArray<string>, options: TetheredSpawnOptions = {}): ChildProcess => {
  const { stdio = 'ignore', watchesTether = false, uid, gid, ...rest } = options
  const [stdin, stdout, stderr] = Array.isArray(stdio) ? stdio : [stdio, stdio, stdio]
  const env = { ...(options.env ?? process.env) }
  let child: ChildProcess
  if (watchesTether) {
    child = spawn(command, [...args], {
      ...rest,
      ...(uid !== undefined ? { uid } : {}),
      ...(gid !== undefined ? { gid } : {}),
      env: { ...env, [EXIT_WITH_PARENT_ENV]: String(TETHER_FD) },
      stdio: [stdin, stdout, stderr, 'pipe']
    })
  } else if (!findable(command, env, options.cwd)) {
    return spawn(command, [...args], {
      ...rest,
      ...(uid !== undefined ? { uid } : {}),
      ...(gid !== undefined ? { gid } : {}),
      env,
      stdio: [stdin, stdout, stderr]
    })
  } else {
    // The watchdog runs as this process's user, so it can always signal the program's group.
    const settings = JSON.stringify({ uid, gid, graceMs: GRACE_MS })
    child = spawn(process.execPath, [WATCHDOG, settings, command, ...args], { ...rest, env, stdio: [stdin, stdout, stderr, 'pipe'] })
  }
  const tether = child.stdio[TETHER_FD] as Socket | null
  // Held, never written: the loop need not wait for it, and its end is no error of ours.
  tether?.on('error', () => undefined)
  tether?.unref()
  return child
}

/** Whether `command` names an executable file, as `spawn` would look it up. */
const findable = (command: string, env: NodeJS.ProcessEnv, cwd: string | URL | undefined): boolean => {
  const base = cwd === undefined ? process.cwd() : cwd instanceof URL ? fileURLToPath(cwd) : cwd
  const candidates = command.includes('/')
    ? [path.resolve(base, command)]
    : (env['PATH'] ?? '')
        .split(path.delimiter)
        .filter((folder) => folder !== '')
        .map((folder) => path.resolve(base, folder, command))
  return candidates.some((file) => {
    try {
      accessSync(file, constants.X_OK)
      return true
    } catch {
      return false
    }
  })
}

/**
 * In an `agentvisor` process started with `AGENTVISOR_EXIT_WITH_PARENT=FD`: watches FD and, at
 * its end, stops as on SIGTERM (a worker drains, a run is cancelled cleanly), or exits 1 if that
 * takes longer than 10 s. The variable is removed, so processes this one starts do not inherit it.
 * Returns an error line when the variable is not a descriptor this process has open.
 */
export const exitWithParent = (): string | undefined => {
  const value = process.env[EXIT_WITH_PARENT_ENV]
  if (value === undefined) return undefined
  delete process.env[EXIT_WITH_PARENT_ENV]
  const fd = /^\d+$/.test(value.trim()) ? Number(value.trim()) : Number.NaN
  if (!Number.isSafeInteger(fd) || fd < 3) {
    return `${EXIT_WITH_PARENT_ENV} must be the number of an open file descriptor above 2 (got "${value}")`
  }
  let tether: Socket
  try {
    tether = new Socket({ fd, readable: true, writable: false })
  } catch (error) {
    return `${EXIT_WITH_PARENT_ENV}=${fd}: not a pipe or socket this process has open (${(error as Error).message})`
  }
  tether.on('error', () => undefined)
  tether.once('close', () => {
    setTimeout(() => process.exit(1), GRACE_MS).unref()
    process.kill(process.pid, 'SIGTERM')
  })
  tether.resume()
  tether.unref()
  return undefined
}
