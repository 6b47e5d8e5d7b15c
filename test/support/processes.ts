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
