import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect, Either } from 'effect'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openWorkspace, relativeInside, resolveInside, type Workspace } from '@agentvisor/core'

let base: string
let ws: Workspace
let outside: string

beforeEach(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-ws-')))
  outside = path.join(base, 'outside')
  mkdirSync(outside)
  writeFileSync(path.join(outside, 'secret.txt'), 'TOP SECRET')
  ws = await Effect.runPromise(openWorkspace(path.join(base, 'ws')))
})

afterEach(() => rmSync(base, { recursive: true, force: true }))

const resolve = (requested: string, purpose: 'read' | 'write' = 'read') => Effect.runPromise(Effect.either(resolveInside(ws, requested, purpose)))

const expectEscape = async (requested: string, purpose: 'read' | 'write' = 'read') => {
  const result = await resolve(requested, purpose)
  if (Either.isRight(result)) throw new Error(`expected ${requested} to be refused, got ${result.right}`)
  expect(result.left._tag).toBe('WorkspaceEscapeError')
  expect(result.left.message).toBe(`Path escapes the workspace boundary: ${requested}`)
}

const expectInside = async (requested: string, expected: string, purpose: 'read' | 'write' = 'read') => {
  const result = await resolve(requested, purpose)
  if (Either.isLeft(result)) throw new Error(`expected ${requested} to resolve, got ${result.left.message}`)
  expect(result.right).toBe(expected)
}

describe('workspace confinement', () => {
  it('creates a missing workspace folder and pins its real path', async () => {
    const linked = path.join(base, 'linked-ws')
    symlinkSync(ws.root, linked)
    const reopened = await Effect.runPromise(openWorkspace(linked))
    expect(reopened.root).toBe(path.join(base, 'ws'))
    const nested = await Effect.runPromise(openWorkspace(path.join(base, 'a', 'b', 'c')))
    expect(nested.root).toBe(path.join(base, 'a', 'b', 'c'))
  })

  it('fails with a WorkspaceError when the folder cannot be created', async () => {
    writeFileSync(path.join(base, 'a-file'), 'x')
    const result = await Effect.runPromise(Effect.either(openWorkspace(path.join(base, 'a-file', 'ws'))))
    expect(Either.isLeft(result) && result.left._tag).toBe('WorkspaceError')
  })

  it('treats an empty path and "." as the root itself', async () => {
    await expectInside('', ws.root)
    await expectInside('.', ws.root)
    await expectInside('./', ws.root)
  })

  it('resolves relative paths, existing or not, to absolute paths under the root', async () => {
    await expectInside('a/b/new.txt', path.join(ws.root, 'a', 'b', 'new.txt'), 'write')
    await expectInside('a/../b.txt', path.join(ws.root, 'b.txt'))
  })

  it('refuses a ".." that leaves the root, even when later segments come back in', async () => {
    await expectEscape('..')
    await expectEscape('../outside/secret.txt')
    await expectEscape('a/../../outside/secret.txt')
    await expectEscape('../ws/inside.txt')
  })

  it('refuses absolute paths, even ones that point inside the workspace', async () => {
    await expectEscape(path.join(outside, 'secret.txt'))
    await expectEscape(path.join(ws.root, 'inside.txt'))
    await expectEscape('/etc/passwd')
  })

  it('refuses a symlink whose target is a file outside', async () => {
    symlinkSync(path.join(outside, 'secret.txt'), path.join(ws.root, 'link.txt'))
    await expectEscape('link.txt', 'read')
    await expectEscape('link.txt', 'write')
  })

  it('refuses a dangling symlink pointing outside, which a write would otherwise create', async () => {
    symlinkSync(path.join(outside, 'not-yet.txt'), path.join(ws.root, 'dangling.txt'))
    await expectEscape('dangling.txt', 'write')
  })

  it('refuses paths through a symlinked folder that points outside, for reads and for new files', async () => {
    symlinkSync(outside, path.join(ws.root, 'out'))
    await expectEscape('out/secret.txt', 'read')
    await expectEscape('out/new/deeper.txt', 'write')
    await expectEscape('out', 'read')
  })

  it('refuses a symlink into a sibling folder whose name merely starts with the root name', async () => {
    const sibling = `${ws.root}-evil`
    mkdirSync(sibling)
    writeFileSync(path.join(sibling, 'loot.txt'), 'loot')
    symlinkSync(sibling, path.join(ws.root, 'evil'))
    await expectEscape('evil/loot.txt')
    symlinkSync('../ws-evil/loot.txt', path.join(ws.root, 'relative-evil.txt'))
    await expectEscape('relative-evil.txt')
  })

  it('follows symlinks that stay inside the workspace', async () => {
    mkdirSync(path.join(ws.root, 'real'))
    writeFileSync(path.join(ws.root, 'real', 'data.txt'), 'data')
    symlinkSync(path.join(ws.root, 'real'), path.join(ws.root, 'alias'))
    symlinkSync('real/data.txt', path.join(ws.root, 'data-link.txt'))
    await expectInside('alias/data.txt', path.join(ws.root, 'real', 'data.txt'))
    await expectInside('data-link.txt', path.join(ws.root, 'real', 'data.txt'))
    await expectInside('alias/new.txt', path.join(ws.root, 'real', 'new.txt'), 'write')
  })

  it('refuses a symlink loop instead of hanging or crashing', async () => {
    symlinkSync('loop-b', path.join(ws.root, 'loop-a'))
    symlinkSync('loop-a', path.join(ws.root, 'loop-b'))
    await expectEscape('loop-a/x.txt', 'write')
  })

  it('spells absolute paths relative to the root for display', () => {
    expect(relativeInside(ws, ws.root)).toBe('.')
    expect(relativeInside(ws, path.join(ws.root, 'a', 'b.txt'))).toBe('a/b.txt')
  })
})
