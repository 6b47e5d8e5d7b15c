import * as fs from 'node:fs'
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect } from 'effect'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openWorkspace, type RootHandle, runTool, verifyNow, withRootHandle, type Workspace } from '@agentvisor/core'

let base: string
let opened: Workspace

beforeEach(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-root-handle-')))
  opened = await Effect.runPromise(openWorkspace(path.join(base, 'ws')))
  mkdirSync(path.join(opened.root, 'src'))
  writeFileSync(path.join(opened.root, 'a.txt'), 'DONE')
})

const handles: RootHandle[] = []
afterEach(() => {
  for (const handle of handles.splice(0)) handle.release()
  rmSync(base, { recursive: true, force: true })
})

/** How many of this process's fds hold the folder `real` open. */
const heldOpen = (real: string): number =>
  readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === real
    } catch {
      return false
    }
  }).length

const held = (): { workspace: Workspace; handle: RootHandle } => {
  const made = withRootHandle(opened)
  made.handle.hold()
  handles.push(made.handle)
  return made
}

const call = (ws: Workspace, name: string, args: unknown) => Effect.runPromise(runTool(ws, { name, arguments: JSON.stringify(args) }))
const refusal = (requested: string) => ({
  ok: false,
  output: `Path escapes the workspace boundary: ${requested}`,
  refusal: { rule: 'workspace', layer: 'sandbox' }
})

describe('a held workspace root', () => {
  it('is opened once by hold, checked to be the workspace, and closed by release; a second release does nothing', () => {
    const { handle } = held()
    expect(handle.fd).toBeGreaterThanOrEqual(0)
    expect(readlinkSync(handle.via)).toBe(opened.root)
    expect(heldOpen(opened.root)).toBe(1)
    handle.hold()
    expect(heldOpen(opened.root)).toBe(1)
    handle.release()
    handle.release()
    expect(handle.fd).toBe(-1)
    expect(heldOpen(opened.root)).toBe(0)
  })

  it('answers every call as an opened root does, and leaves no fd open per call', async () => {
    const { workspace } = held()
    const fds = readdirSync('/proc/self/fd').length
    expect(verifyNow(workspace, { fileContains: { path: 'a.txt', text: 'DONE' } })).toEqual({ passed: true, detail: 'a.txt contains "DONE"' })
    expect(verifyNow(workspace, { fileContains: { path: 'never.txt', text: 'DONE' } })).toEqual({ passed: false, detail: 'never.txt does not exist' })
    expect(await call(workspace, 'list_dir', { path: '.' })).toEqual({ ok: true, output: 'a.txt\nsrc/' })
    expect(await call(workspace, 'write_file', { path: 'src/b.txt', content: 'beta' })).toMatchObject({ ok: true })
    expect(await call(workspace, 'read_file', { path: 'src/b.txt' })).toEqual({ ok: true, output: 'beta' })
    expect(await call(workspace, 'read_file', { path: '../ws/a.txt' })).toEqual(refusal('../ws/a.txt'))
    expect(readdirSync('/proc/self/fd').length).toBe(fds)
    expect(heldOpen(opened.root)).toBe(1)
  })

  it('holds nothing when the workspace path is no longer the folder the run opened, and every call is refused', async () => {
    const moved = path.join(base, 'moved-ws')
    renameSync(opened.root, moved)
    symlinkSync(moved, opened.root)
    const { workspace, handle } = held()
    expect(handle.fd).toBe(-1)
    expect(heldOpen(moved)).toBe(0)
    expect(await call(workspace, 'read_file', { path: 'a.txt' })).toEqual(refusal('a.txt'))
  })

  // A held handle names the folder the run opened wherever it goes; the workspace is the path.
  // So a call checks first that the kernel still names the held folder the workspace, and
  // otherwise opens the root by its path as a call without a held root does: each case below
  // gives the same answers held and not held.
  describe.each([
    ['opened per call', () => opened],
    ['held', () => held().workspace]
  ])('with the root %s', (_, workspaceOf) => {
    it('refuses every call once the workspace folder is replaced by a symlink to the very folder moved away', async () => {
      const ws = workspaceOf()
      const moved = path.join(base, 'moved-ws')
      renameSync(opened.root, moved)
      symlinkSync(moved, opened.root)
      expect(await call(ws, 'read_file', { path: 'a.txt' })).toEqual(refusal('a.txt'))
      expect(await call(ws, 'list_dir', { path: '.' })).toEqual(refusal('.'))
      expect(await call(ws, 'write_file', { path: 'new.txt', content: 'x' })).toEqual(refusal('new.txt'))
      expect(verifyNow(ws, { fileContains: { path: 'never.txt', text: 'DONE' } })).toEqual({
        passed: false,
        detail: 'Path escapes the workspace boundary: never.txt'
      })
      expect(fs.readdirSync(moved).sort()).toEqual(['a.txt', 'src'])
    })

    it('acts on the new folder once the workspace folder is moved away and a new one made at its path, never on the moved one', async () => {
      const ws = workspaceOf()
      const moved = path.join(base, 'moved-ws')
      renameSync(opened.root, moved)
      mkdirSync(opened.root)
      expect(verifyNow(ws, { fileContains: { path: 'a.txt', text: 'DONE' } })).toEqual({ passed: false, detail: 'a.txt does not exist' })
      expect(await call(ws, 'write_file', { path: 'b.txt', content: 'beta' })).toMatchObject({ ok: true })
      expect(await call(ws, 'list_dir', { path: '.' })).toEqual({ ok: true, output: 'b.txt' })
      expect(fs.readdirSync(opened.root)).toEqual(['b.txt'])
      expect(fs.readdirSync(moved).sort()).toEqual(['a.txt', 'src'])
    })

    it('answers that nothing is there once the workspace folder is moved away and nothing takes its place', async () => {
      const ws = workspaceOf()
      renameSync(opened.root, path.join(base, 'moved-ws'))
      expect(verifyNow(ws, { fileContains: { path: 'a.txt', text: 'DONE' } })).toEqual({ passed: false, detail: 'a.txt does not exist' })
      expect(await call(ws, 'read_file', { path: 'a.txt' })).toEqual({ ok: false, output: 'No such file: a.txt' })
      expect(await call(ws, 'list_dir', { path: 'src' })).toEqual({ ok: false, output: 'No such folder: src' })
    })

    it('acts on the folder again once it is moved back to the workspace path', async () => {
      const ws = workspaceOf()
      const moved = path.join(base, 'moved-ws')
      renameSync(opened.root, moved)
      expect(verifyNow(ws, { fileContains: { path: 'a.txt', text: 'DONE' } })).toEqual({ passed: false, detail: 'a.txt does not exist' })
      renameSync(moved, opened.root)
      expect(verifyNow(ws, { fileContains: { path: 'a.txt', text: 'DONE' } })).toEqual({ passed: true, detail: 'a.txt contains "DONE"' })
    })
  })
})
