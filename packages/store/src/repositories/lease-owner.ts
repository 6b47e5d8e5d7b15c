import { createHash, randomUUID } from 'node:crypto'
import { readFileSync, readlinkSync } from 'node:fs'
import { hostname } from 'node:os'

// Lease owners, and the lease facts read from a run row alone, with nothing but Node:
// `agentvisor runs` uses them without loading Kysely (see sqlite/sqlite-reader.ts).

/**
 * Which process table this process sees: the kernel's boot and this process's PID namespace,
 * hashed. Two owners with the same host name but another table (two machines cloned from one
 * image, two containers sharing the host's name but not its PIDs) cannot check each other's
 * PIDs, so neither takes the other's lease before it expires. Where neither is readable (not
 * Linux), the host name alone decides, as before.
 */
let table: string | undefined
const processTable = (): string => {
  if (table !== undefined) return table
  const facts: string[] = []
  try {
    facts.push(readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim())
  } catch {
    // not Linux
  }
  try {
    facts.push(readlinkSync('/proc/self/ns/pid'))
  } catch {
    // not Linux
  }
  table = createHash('sha256').update(facts.join('\n')).digest('hex').slice(0, 8)
  return table
}

/**
 * A lease owner name for a new supervisor of this process: `host/pid/nonce/table`. The nonce
 * tells two supervisors of one process apart; `table` is which process table `pid` is in.
 */
export const makeLeaseOwner = (): string => `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}/${processTable()}`

/** Whether `owner` names a process whose PID this process can look up: same host, same table. */
const sameProcessTable = (host: string | undefined, ownerTable: string | undefined): boolean =>
  host === hostname() && (ownerTable === undefined || ownerTable === processTable()) // an older version's owner has no table

/** Whether a lease owner name is one of this process's supervisors. */
export const isOwnedByThisProcess = (owner: string): boolean => {
  const [host, pid, , ownerTable] = owner.split('/')
  return sameProcessTable(host, ownerTable) && pid === String(process.pid)
}

/**
 * A holder in this process table whose process is gone left its lease behind (a crash, a
 * SIGKILL): it may be taken over at once instead of after the expiry. Any other holder (another
 * host, another PID namespace) waits for expiry.
 */
export const isAbandonedOwner = (owner: string): boolean => {
  const [host, pidText, , ownerTable] = owner.split('/')
  const pid = Number(pidText)
  if (!sameProcessTable(host, ownerTable) || !Number.isInteger(pid) || pid === process.pid) return false
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
  run.status === 'running' && (run.lease_owner === null || run.lease_expires_at === null || run.lease_expires_at <= now || isAbandonedOwner(run.lease_owner))
