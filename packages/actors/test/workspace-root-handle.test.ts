import { mkdtempSync, readdirSync, readlinkSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Agentvisor } from '@agentvisor/actors'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** This process's open fds (the test file runs in a process of its own: vitest's `forks` pool). */
const openFds = (): string[] => readdirSync('/proc/self/fd')
/** How many of this process's fds hold the folder `real` open. */
const heldOpen = (real: string): number =>
  openFds().filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === real
    } catch {
      return false
    }
  }).length

const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: p, content } }] })

describe("a run's workspace root handle", () => {
  it('is held open while each run runs and closed when it finishes, pauses, is cancelled, times out or the Agentvisor closes', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'av-root-handle-'))
    dirs.push(dir)
    const before = openFds().length
    const av = await Agentvisor.open({ db: path.join(dir, 'av.db'), telemetry: false })
    const ws = (name: string) => path.join(dir, name)
    let dispatched = 0
    const inFlight = Array.from({ length: 12 }, (_, i) =>
      av.start(
        {
          goal: 'g',
          workspace: ws(`hang-${i}`),
          approval: 'auto',
          providers: [{ name: 'p', kind: 'scripted', steps: [{ delayMs: 60_000, text: 'late' }] }],
          verify: { fileContains: { path: 'never.txt', text: 'DONE' } }
        },
        { observers: [{ onDispatch: () => (dispatched += 1) }] }
      )
    )
    const handles = await Promise.all(inFlight)
    while (dispatched < handles.length) await new Promise((resolve) => setImmediate(resolve))
    // Each run in flight holds its own root, once.
    for (let i = 0; i < handles.length; i++) expect(heldOpen(realpathSync(ws(`hang-${i}`)))).toBe(1)

    // Half are cancelled: their roots are let go at once, the others' stay held.
    for (let i = 0; i < 6; i++) await handles[i]!.cancel()
    for (let i = 0; i < 6; i++) expect(await handles[i]!.result).toMatchObject({ status: 'cancelled' })
    for (let i = 0; i < handles.length; i++) expect(heldOpen(realpathSync(ws(`hang-${i}`)))).toBe(i < 6 ? 0 : 1)

    // Runs that succeed, hit their step cap, pause for approval or time out let go of theirs too.
    const ended = await Promise.all([
      ...Array.from({ length: 8 }, (_, i) =>
        av.run({
          goal: 'g',
          workspace: ws(`done-${i}`),
          approval: 'auto',
          providers: [{ name: 'p', kind: 'scripted', steps: [write('out.txt', 'DONE')] }],
          verify: { fileContains: { path: 'out.txt', text: 'DONE' } }
        })
      ),
      av.run({
        goal: 'g',
        workspace: ws('cap'),
        approval: 'auto',
        providers: [{ name: 'p', kind: 'scripted', steps: [] }],
        verify: { fileContains: { path: 'never.txt', text: 'DONE' } },
        limits: { maxSteps: 5 }
      }),
      av.run({
        goal: 'g',
        workspace: ws('paused'),
        approval: 'prompt',
        providers: [{ name: 'p', kind: 'scripted', steps: [write('out.txt', 'DONE')] }],
        verify: { fileContains: { path: 'out.txt', text: 'DONE' } }
      }),
      av.run({
        goal: 'g',
        workspace: ws('late'),
        approval: 'auto',
        providers: [{ name: 'p', kind: 'scripted', steps: [{ delayMs: 60_000, text: 'late' }] }],
        limits: { timeoutMs: 200 }
      })
    ])
    expect(ended.map((r) => r.status)).toEqual([...Array(8).fill('succeeded'), 'step_cap', 'awaiting_approval', 'timed_out'])
    for (const name of [...Array.from({ length: 8 }, (_, i) => `done-${i}`), 'cap', 'paused', 'late']) expect(heldOpen(realpathSync(ws(name)))).toBe(0)

    // Closing lets go of the runs still in flight: nothing the runs opened is left open.
    await av.close()
    for (let i = 0; i < handles.length; i++) expect(heldOpen(realpathSync(ws(`hang-${i}`)))).toBe(0)
    expect(openFds().length).toBe(before)
  })
})
