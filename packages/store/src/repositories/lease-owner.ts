import { hostname } from 'node:os'

// Lease facts read from a run row alone, with nothing but Node: `agentvisor runs` uses them
// without loading Kysely (see sqlite/sqlite-reader.ts).

/**
 * A holder on this host whose process is gone left its lease behind (a crash, a SIGKILL): it may
 * be taken over at once instead of after the expiry. Holders on other hosts wait for expiry.
 */
export const isAbandonedOwner = (owner: string): boolean => {
  const [host, pidText] = owner.split('/')
  const pid = Number(pidText)
  if (host !== hostname() || !Number.isInteger(pid) || pid === process.pid) return false
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH'
  }
}


/**
 * A run that should be moving but nobody drives: status `running` and no live lease (none, an
 * expired one, or one left by a dead process of this host). `resume --all` picks these up.
 */
export const isInterrupted = (
  run: { readonly status: string; readonly lease_owner: string | null; readonly lease_expires_at: number | null },
  now: number
): boolean =>
  run.status === 'running' &&
  (run.lease_owner === null || run.lease_expires_at === null || run.lease_expires_at <= now || isAbandonedOwner(run.lease_owner))
