import { readdirSync, readFileSync } from 'node:fs'

/** PIDs of live processes whose command line contains `marker` (read from /proc, Linux). */
export const processesMatching = (marker: string): number[] => {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid) || pid === process.pid) continue
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')
      const state = /State:\s+(\S)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
      // Zombies are dead already: they only wait for a parent to reap them.
      if (cmdline.includes(marker) && state !== 'Z') pids.push(pid)
    } catch {
      // The process ended while we looked.
    }
  }
  return pids
}

/** Kills every process matching `marker` (orphans a SIGKILLed driver left behind). */
export const killMatching = (marker: string): void => {
  for (const pid of processesMatching(marker)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // Already gone.
    }
  }
}

/**
 * Waits until the process whose lease `runId` still names is gone: a driver SIGKILLed under a
 * terminal (`script`) is gone once it is reaped, not when `script` exits, and until then its
 * lease is rightly held (a resume would be refused).
 */
export const waitForLeaseHolderGone = async (db: string, runId: string): Promise<void> => {
  const { default: BetterSqlite3 } = await import('better-sqlite3')
  const raw = new BetterSqlite3(db, { readonly: true })
  const owner = raw.prepare('SELECT lease_owner FROM runs WHERE id = ?').pluck().get(runId) as string | null
  raw.close()
  if (owner === null) return
  const pid = Number(owner.split('/')[1])
  const until = Date.now() + 120_000
  for (;;) {
    try {
      process.kill(pid, 0)
    } catch {
      return
    }
    if (Date.now() > until) throw new Error(`timed out waiting for the driver ${owner} to be reaped`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** The parent PID of every live process (read from /proc/PID/stat, Linux). */
const parents = (): Map<number, number> => {
  const map = new Map<number, number>()
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid)) continue
    try {
      // The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      map.set(pid, Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]))
    } catch {
      // The process ended while we looked.
    }
  }
  return map
}

/** Every live descendant of `pid` (children, their children...), with its command line. */
export const descendants = (pid: number): Array<{ readonly pid: number; readonly command: string }> => {
  const byParent = new Map<number, number[]>()
  for (const [child, parent] of parents()) byParent.set(parent, [...(byParent.get(parent) ?? []), child])
  const found: Array<{ pid: number; command: string }> = []
  const visit = (parent: number): void => {
    for (const child of byParent.get(parent) ?? []) {
      try {
        found.push({ pid: child, command: readFileSync(`/proc/${child}/cmdline`, 'utf8').replaceAll('\0', ' ').trim() })
      } catch {
        continue // ended while we looked
      }
      visit(child)
    }
  }
  visit(pid)
  return found
}

/** Whether `pid` is gone: no such process, or a zombie (dead, waiting to be reaped). */
export const isGone = (pid: number): boolean => {
  try {
    return /State:\s+Z/.test(readFileSync(`/proc/${pid}/status`, 'utf8'))
  } catch {
    return true
  }
}

/** SIGKILLs each of `pids` still there (what a failed test must not leave running). */
export const killAll = (pids: ReadonlyArray<number>): void => {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
}
