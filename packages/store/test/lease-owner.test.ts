import { spawnSync } from 'node:child_process'
import { hostname } from 'node:os'
import { describe, expect, it } from 'vitest'
import { isAbandonedOwner, isInterrupted, isOwnedByThisProcess, makeLeaseOwner } from '@agentvisor/store'

/** The PID of a process that has just exited: nobody holds it now. */
const deadPid = (): number => Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout)

describe('lease owners', () => {
  it('names this host, this process, a nonce per supervisor and the process table it is in', () => {
    const [a, b] = [makeLeaseOwner(), makeLeaseOwner()]
    expect(a).toMatch(new RegExp(`^${hostname()}/${process.pid}/[0-9a-f]{8}/[0-9a-f]{8}$`))
    expect(a).not.toBe(b)
    // Same process table for both: only the nonce differs.
    expect(a.split('/')[3]).toBe(b.split('/')[3])
    expect(isOwnedByThisProcess(a)).toBe(true)
    expect(isOwnedByThisProcess(`${hostname()}/${Number(process.pid) + 1}/00000000/${a.split('/')[3]}`)).toBe(false)
  })

  it('takes over at once only from a dead process it can see: same host and same process table', () => {
    const pid = deadPid()
    const table = makeLeaseOwner().split('/')[3]
    expect(isAbandonedOwner(`${hostname()}/${pid}/00000000/${table}`)).toBe(true)
    // A machine cloned under the same name, or a container sharing the name but not the PIDs:
    // its PID means nothing here, so its lease is left to expire.
    const otherTable = table === 'ffffffff' ? 'eeeeeeee' : 'ffffffff'
    expect(isAbandonedOwner(`${hostname()}/${pid}/00000000/${otherTable}`)).toBe(false)
    expect(isAbandonedOwner(`another-host/${pid}/00000000/${table}`)).toBe(false)
    // A live process, and this one, are never abandoned.
    expect(isAbandonedOwner(`${hostname()}/${process.ppid}/00000000/${table}`)).toBe(false)
    expect(isAbandonedOwner(makeLeaseOwner())).toBe(false)
    // An owner named by an older version (no table) is judged by its host alone.
    expect(isAbandonedOwner(`${hostname()}/${pid}/00000000`)).toBe(true)
  })

  it('counts a running run whose holder is gone, or whose lease expired, as interrupted', () => {
    const pid = deadPid()
    const table = makeLeaseOwner().split('/')[3]
    const now = 10_000
    const running = { status: 'running', lease_owner: makeLeaseOwner(), lease_expires_at: now + 1000 }
    expect(isInterrupted(running, now)).toBe(false)
    expect(isInterrupted({ ...running, lease_expires_at: now }, now)).toBe(true)
    expect(isInterrupted({ ...running, lease_owner: `${hostname()}/${pid}/00000000/${table}` }, now)).toBe(true)
    expect(isInterrupted({ ...running, lease_owner: null }, now)).toBe(true)
    expect(isInterrupted({ ...running, status: 'succeeded', lease_owner: null }, now)).toBe(false)
  })
})
