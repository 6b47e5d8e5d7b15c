import * as fs from 'node:fs'
import { mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect } from 'effect'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { openWorkspace, runTool, verify, verifyNow, type Workspace } from '@agentvisor/core'
import { listInsideNow, readInsideNow } from '../src/tools/confined-fs.js'
import type { PinOptions } from '../src/tools/pinned-fs.js'

const SECRET = 'OUTSIDE-SECRET-13'

let base: string
let outside: string
let ws: Workspace

beforeEach(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-confined-')))
  outside = path.join(base, 'outside')
  mkdirSync(outside)
  writeFileSync(path.join(outside, 'secret.txt'), SECRET)
  ws = await Effect.runPromise(openWorkspace(path.join(base, 'ws')))
  mkdirSync(path.join(ws.root, 'src', 'deep'), { recursive: true })
  writeFileSync(path.join(ws.root, 'src', 'deep', 'a.txt'), 'alpha')
  writeFileSync(path.join(ws.root, 'src', 'b.txt'), 'beta')
})

afterEach(() => {
  vi.restoreAllMocks()
  rmSync(base, { recursive: true, force: true })
})

const text = (found: unknown): string => {
  if (found instanceof Promise) throw new Error('expected an answer at once, got a promise')
  const read = found as { kind: string; head?: Buffer }
  if (read.kind !== 'file' || read.head === undefined) throw new Error(`expected a file, got ${JSON.stringify(found)}`)
  return read.head.toString('utf8')
}

const refusedWith = (run: () => unknown, requested: string) =>
  expect(run).toThrow(expect.objectContaining({ _tag: 'WorkspaceEscapeError', message: `Path escapes the workspace boundary: ${requested}` }))

describe.each([
  ['through /proc/self/fd', {}],
  // Not Linux: the path is resolved, then walked by path with each handle checked after it is opened.
  ['where /proc is missing', { fdLinks: '/nonexistent-fd-links' }]
] satisfies ReadonlyArray<[string, PinOptions]>)('reading and listing a workspace path in one walk, %s', (_, options) => {
  it('answers a missing file, a missing folder on the way and a file on the way as values, at once', () => {
    expect(readInsideNow(ws, 'never-written.txt', undefined, options)).toEqual({ kind: 'missing', code: 'ENOENT' })
    expect(readInsideNow(ws, 'out/result.txt', undefined, options)).toEqual({ kind: 'missing', code: 'ENOENT' })
    expect(readInsideNow(ws, 'src/deep/missing.txt', 10, options)).toEqual({ kind: 'missing', code: 'ENOENT' })
    expect(listInsideNow(ws, 'nope', 10, options)).toEqual({ kind: 'missing', code: 'ENOENT' })
    expect(listInsideNow(ws, 'src/b.txt', 10, options)).toEqual({ kind: 'missing', code: 'ENOTDIR' })
  })

  it('reads and lists paths without symlinks, "." and ".." inside included', () => {
    expect(text(readInsideNow(ws, 'src/deep/a.txt', undefined, options))).toBe('alpha')
    expect(text(readInsideNow(ws, './src/deep/../b.txt', 2, options))).toBe('be')
    expect(readInsideNow(ws, 'src', undefined, options)).toEqual({ kind: 'folder' })
    expect(readInsideNow(ws, '.', undefined, options)).toEqual({ kind: 'folder' })
    expect(listInsideNow(ws, 'src', 10, options)).toEqual({
      shown: [
        { name: 'b.txt', isFolder: false },
        { name: 'deep', isFolder: true }
      ],
      total: 2
    })
    expect(listInsideNow(ws, '', 10, options)).toEqual({ shown: [{ name: 'src', isFolder: true }], total: 1 })
  })

  it('follows symlinks that stay inside, on the way and at the end, whatever their text', () => {
    symlinkSync(path.join(ws.root, 'src'), path.join(ws.root, 'alias'))
    symlinkSync('deep/a.txt', path.join(ws.root, 'src', 'a-link.txt'))
    symlinkSync('../deep', path.join(ws.root, 'src', 'deep', 'up-and-back'))
    expect(text(readInsideNow(ws, 'alias/deep/a.txt', undefined, options))).toBe('alpha')
    expect(text(readInsideNow(ws, 'src/a-link.txt', undefined, options))).toBe('alpha')
    expect(text(readInsideNow(ws, 'alias/a-link.txt', undefined, options))).toBe('alpha')
    expect(text(readInsideNow(ws, 'src/deep/up-and-back/a.txt', undefined, options))).toBe('alpha')
    expect(readInsideNow(ws, 'alias/nope.txt', undefined, options)).toEqual({ kind: 'missing', code: 'ENOENT' })
    expect(listInsideNow(ws, 'alias/deep', 10, options)).toEqual({
      shown: [
        { name: 'a.txt', isFolder: false },
        { name: 'up-and-back', isFolder: true }
      ],
      total: 2
    })
  })

  it('refuses symlinks that lead outside, dangling ones included, and paths that leave lexically', () => {
    symlinkSync(outside, path.join(ws.root, 'src', 'out'))
    symlinkSync(path.join(outside, 'secret.txt'), path.join(ws.root, 'secret-link.txt'))
    symlinkSync(path.join(outside, 'not-yet.txt'), path.join(ws.root, 'dangling.txt'))
    symlinkSync('../../outside', path.join(ws.root, 'src', 'relative-out'))
    refusedWith(() => readInsideNow(ws, 'src/out/secret.txt', undefined, options), 'src/out/secret.txt')
    refusedWith(() => readInsideNow(ws, 'secret-link.txt', undefined, options), 'secret-link.txt')
    refusedWith(() => readInsideNow(ws, 'dangling.txt', undefined, options), 'dangling.txt')
    refusedWith(() => readInsideNow(ws, 'src/relative-out/secret.txt', undefined, options), 'src/relative-out/secret.txt')
    refusedWith(() => listInsideNow(ws, 'src/out', 10, options), 'src/out')
    refusedWith(() => readInsideNow(ws, '../outside/secret.txt', undefined, options), '../outside/secret.txt')
    refusedWith(() => readInsideNow(ws, path.join(outside, 'secret.txt'), undefined, options), path.join(outside, 'secret.txt'))
    refusedWith(() => listInsideNow(ws, 'src/../..', 10, options), 'src/../..')
  })
})

describe('the workspace root', () => {
  it('is resolved once, when the workspace is opened, and not again for calls on paths without symlinks', async () => {
    writeFileSync(path.join(ws.root, 'out.txt'), 'DONE')
    const realpath = vi.spyOn(fs.realpathSync, 'native')
    const spec = { allOf: [{ fileContains: { path: 'out.txt', text: 'DONE' } }, { fileEquals: { path: 'src/deep/missing.txt', text: 'x' } }] }
    for (let i = 0; i < 5; i++) {
      expect(verifyNow(ws, spec)).toEqual({ passed: false, detail: 'src/deep/missing.txt does not exist' })
      expect(await Effect.runPromise(runTool(ws, { name: 'read_file', arguments: '{"path":"src/deep/a.txt"}' }))).toEqual({ ok: true, output: 'alpha' })
      expect(await Effect.runPromise(runTool(ws, { name: 'list_dir', arguments: '{"path":"src"}' }))).toEqual({ ok: true, output: 'b.txt\ndeep/' })
      expect(await Effect.runPromise(runTool(ws, { name: 'write_file', arguments: '{"path":"made/c.txt","content":"c"}' }))).toMatchObject({ ok: true })
    }
    expect(realpath).not.toHaveBeenCalled()
    // Only a path that meets a symlink is resolved the long way.
    symlinkSync(path.join(ws.root, 'src'), path.join(ws.root, 'alias'))
    expect(text(readInsideNow(ws, 'alias/deep/a.txt', undefined))).toBe('alpha')
    expect(realpath).toHaveBeenCalled()
  })

  it('refuses every call once the workspace folder is replaced by a symlink, even one to the very folder moved away', async () => {
    const moved = path.join(base, 'moved-ws')
    renameSync(ws.root, moved)
    symlinkSync(moved, ws.root)
    writeFileSync(path.join(moved, 'out.txt'), 'DONE')
    const refusal = (requested: string) => ({
      ok: false,
      output: `Path escapes the workspace boundary: ${requested}`,
      refusal: { rule: 'workspace', layer: 'sandbox' }
    })
    const call = (name: string, args: unknown) => Effect.runPromise(runTool(ws, { name, arguments: JSON.stringify(args) }))
    expect(await call('read_file', { path: 'out.txt' })).toEqual(refusal('out.txt'))
    expect(await call('read_file', { path: 'never-written.txt' })).toEqual(refusal('never-written.txt'))
    expect(await call('list_dir', { path: '.' })).toEqual(refusal('.'))
    expect(await call('write_file', { path: 'new.txt', content: 'x' })).toEqual(refusal('new.txt'))
    expect(await Effect.runPromise(verify(ws, { fileContains: { path: 'out.txt', text: 'DONE' } }))).toEqual({
      passed: false,
      detail: 'Path escapes the workspace boundary: out.txt'
    })
    expect(fs.readdirSync(moved).sort()).toEqual(['out.txt', 'src'])
  })
})
