import { randomUUID } from 'node:crypto'
import { constants, promises as fs, type Dirent, type Stats } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import * as path from 'node:path'
import type { WorkspaceEscapeError } from '../errors.js'
import { fsErrorCode } from './tool-outcome.js'

/**
 * Acting on a checked path without following a symlink swapped in after the check
 * (docs/task-file.md, "Tools offered to the model").
 *
 * Checking a path and then handing its string to `open` leaves a window: a concurrent process
 * (a background `exec`, anything on the host) can turn a checked folder into a symlink to the
 * outside before the call acts. Node has no `openat`, but on Linux `/proc/self/fd/N` is a magic
 * link to the very object fd N holds open, so `/proc/self/fd/N/name` looks `name` up inside
 * that pinned folder whatever its path now points to. The folder walk opens the workspace root,
 * checks it is the root, then opens each folder of the already-checked real path relative to
 * the previous one with O_NOFOLLOW: a component that became a symlink fails to open and the
 * call is refused instead of acting elsewhere.
 *
 * Where /proc is missing (not Linux), every handle is checked after it is opened instead: its
 * inode must be the one now at the checked real path. That makes reads and listings safe (what
 * is read comes from the checked handle), but a write still names its target by path, so there
 * it only narrows the window.
 */

const FOLDER_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW
// O_NONBLOCK: a FIFO swapped in after the lstat must not block the open.
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW

/** Where this process's fds appear as magic links; replaceable so tests can exercise the fallback. */
export interface PinOptions {
  readonly fdLinks?: string | undefined
}

const DEFAULT_FD_LINKS = '/proc/self/fd'

/**
 * Whether `candidate` is `root` or lies below it. Compared with `path.relative` rather than a
 * string prefix so that a sibling such as `/ws-evil` never passes for `/ws`.
 */
export const isInside = (root: string, candidate: string): boolean => {
  const rel = path.relative(root, candidate)
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel))
}

/** A folder held open; names inside it are reached through `via`. */
interface PinnedFolder {
  readonly handle: FileHandle
  /** `/proc/self/fd/N` when anchored; otherwise the folder's real path. */
  readonly via: string
  /** The real path the folder was checked at. */
  readonly real: string
  /** Whether `via` is a magic link to `handle` (Linux) rather than a path string. */
  readonly anchored: boolean
}

/** What the caller needs: the root the path must stay in and how to refuse. */
export interface PinTarget {
  readonly root: string
  readonly refuse: () => WorkspaceEscapeError
  readonly options?: PinOptions | undefined
}

const entryOf = (dir: PinnedFolder, name: string): string => `${dir.via}/${name}`

const sameInode = (a: Stats, b: Stats): boolean => a.dev === b.dev && a.ino === b.ino

/** The path fd `handle` stands for, or undefined where the fd links do not exist. */
const fdPath = (handle: FileHandle, options: PinOptions | undefined): Promise<string | undefined> =>
  fs.readlink(`${options?.fdLinks ?? DEFAULT_FD_LINKS}/${handle.fd}`).catch(() => undefined)

/**
 * Checks an opened handle against the real path it was meant to be: anchored, the kernel's own
 * name for the fd must lie inside the root; otherwise the inode at `real` must be the handle's.
 * Anything that cannot be confirmed is refused.
 */
const confirmHandle = async (target: PinTarget, handle: FileHandle, real: string, anchored: boolean): Promise<void> => {
  if (anchored) {
    const actual = await fdPath(handle, target.options)
    if (actual === undefined || !isInside(target.root, actual)) throw target.refuse()
    return
  }
  const [opened, current, resolved] = await Promise.all([handle.stat(), fs.stat(real).catch(() => undefined), fs.realpath(real).catch(() => undefined)])
  if (current === undefined || resolved !== real || !sameInode(opened, current)) throw target.refuse()
}

const closeQuietly = (handle: FileHandle): Promise<void> => handle.close().catch(() => undefined)

/** Whether `entry` is now a symlink: an open that failed on it means it was swapped after the check. */
const isSymlink = (entry: string): Promise<boolean> =>
  fs.lstat(entry).then(
    (stat) => stat.isSymbolicLink(),
    () => false
  )

/** Opens `name` inside `parent` as a folder, creating it first when asked; a symlink there is refused. */
const openChildFolder = async (target: PinTarget, parent: PinnedFolder, name: string, create: boolean): Promise<FileHandle> => {
  const entry = entryOf(parent, name)
  try {
    return await fs.open(entry, FOLDER_FLAGS)
  } catch (error) {
    const code = fsErrorCode(error)
    if (code === 'ENOENT' && create) {
      // mkdir never follows a symlink at its last component (EEXIST), so it cannot create outside.
      await fs.mkdir(entry).catch((mkdirError: unknown) => {
        if (fsErrorCode(mkdirError) !== 'EEXIST') throw mkdirError
      })
      return openChildFolder(target, parent, name, false)
    }
    // O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR (or ELOOP): tell that from a plain file.
    if ((code === 'ENOTDIR' || code === 'ELOOP') && (await isSymlink(entry))) throw target.refuse()
    throw error
  }
}

/**
 * Without fd links, missing folders are created by path one at a time, each only after its
 * parent was seen to be a real folder inside: `mkdir -p` would follow a swapped symlink.
 * A swap between that look and the `mkdir` still wins; see the module comment.
 */
const makeFoldersByPath = async (target: PinTarget, components: readonly string[]): Promise<void> => {
  let current = target.root
  for (const name of components) {
    const next = path.join(current, name)
    const seen = await fs.lstat(next).catch((error: unknown) => {
      if (fsErrorCode(error) === 'ENOENT') return undefined
      throw error
    })
    if (seen?.isSymbolicLink() === true) throw target.refuse()
    if (seen === undefined) {
      if ((await fs.realpath(current)) !== current) throw target.refuse()
      await fs.mkdir(next).catch((error: unknown) => {
        if (fsErrorCode(error) !== 'EEXIST') throw error
      })
    }
    current = next
  }
}

/**
 * Opens the folder at real path `root/components...`, each component relative to the previous
 * folder's fd, creating missing ones when `create` is set. The result is confirmed inside the
 * root; the caller closes it.
 */
const pinFolder = async (target: PinTarget, components: readonly string[], create: boolean): Promise<PinnedFolder> => {
  const real = path.join(target.root, ...components)
  const rootHandle = await fs.open(target.root, constants.O_RDONLY | constants.O_DIRECTORY)
  const rootLink = await fdPath(rootHandle, target.options)
  if (rootLink === undefined) {
    // No fd links: open the folder by its path and check the handle against it afterwards.
    await closeQuietly(rootHandle)
    if (create) await makeFoldersByPath(target, components)
    const handle = await fs.open(real, FOLDER_FLAGS).catch(async (error: unknown) => {
      const code = fsErrorCode(error)
      if ((code === 'ENOTDIR' || code === 'ELOOP') && (await isSymlink(real))) throw target.refuse()
      throw error
    })
    try {
      await confirmHandle(target, handle, real, false)
    } catch (error) {
      await closeQuietly(handle)
      throw error
    }
    return { handle, via: real, real, anchored: false }
  }
  const fdLinks = target.options?.fdLinks ?? DEFAULT_FD_LINKS
  let current: PinnedFolder = { handle: rootHandle, via: `${fdLinks}/${rootHandle.fd}`, real: target.root, anchored: true }
  try {
    // The root's own path could have been redirected on the way to it.
    if (rootLink !== target.root) throw target.refuse()
    for (const name of components) {
      const handle = await openChildFolder(target, current, name, create)
      await closeQuietly(current.handle)
      current = {
        handle,
        via: `${fdLinks}/${handle.fd}`,
        real: path.join(current.real, name),
        anchored: true
      }
    }
    // A folder renamed out of the workspace while it was held open is caught here.
    await confirmHandle(target, current.handle, current.real, true)
    return current
  } catch (error) {
    await closeQuietly(current.handle)
    throw error
  }
}

/** The components of `real` below the root; empty for the root itself. */
const componentsOf = (root: string, real: string): string[] => {
  const rel = path.relative(root, real)
  return rel === '' ? [] : rel.split(path.sep)
}

const withFolder = async <A>(target: PinTarget, components: readonly string[], create: boolean, use: (dir: PinnedFolder) => Promise<A>): Promise<A> => {
  const dir = await pinFolder(target, components, create)
  try {
    return await use(dir)
  } finally {
    await closeQuietly(dir.handle)
  }
}

/** What a confined read found at the path. */
export type PinnedRead = { readonly kind: 'file'; readonly head: Buffer; readonly size: number } | { readonly kind: 'folder' } | { readonly kind: 'special' }

/** Reads at most `max` bytes from the start of an open file, however large it is. */
const readHead = async (handle: FileHandle, max: number): Promise<Buffer> => {
  const buffer = Buffer.alloc(max)
  let filled = 0
  while (filled < max) {
    const { bytesRead } = await handle.read(buffer, filled, max - filled, filled)
    if (bytesRead === 0) break
    filled += bytesRead
  }
  return buffer.subarray(0, filled)
}

/**
 * Reads the file at `real` (already checked inside `target.root`) through pinned folders: at
 * most `max` bytes, or all of it when `max` is undefined. Throws the target's escape error when
 * the path was swapped to lead elsewhere, and Node's file-system errors (ENOENT, ...) otherwise.
 */
export const readPinned = (target: PinTarget, real: string, max: number | undefined): Promise<PinnedRead> => {
  const components = componentsOf(target.root, real)
  const name = components.pop()
  if (name === undefined) return Promise.resolve({ kind: 'folder' })
  return withFolder(target, components, false, async (dir) => {
    const entry = entryOf(dir, name)
    // Looked at before opening so that a FIFO or device is never opened at all.
    const seen = await fs.lstat(entry)
    if (seen.isSymbolicLink()) throw target.refuse()
    if (seen.isDirectory()) return { kind: 'folder' }
    if (!seen.isFile()) return { kind: 'special' }
    const handle = await fs.open(entry, READ_FLAGS).catch(async (error: unknown) => {
      if (fsErrorCode(error) === 'ELOOP' || (await isSymlink(entry))) throw target.refuse()
      throw error
    })
    try {
      await confirmHandle(target, handle, path.join(dir.real, name), dir.anchored)
      const stat = await handle.stat()
      if (stat.isDirectory()) return { kind: 'folder' }
      if (!stat.isFile()) return { kind: 'special' }
      const head = max === undefined ? await handle.readFile() : await readHead(handle, max)
      return { kind: 'file', head, size: stat.size }
    } finally {
      await closeQuietly(handle)
    }
  })
}

/** One entry of a confined listing. */
export interface PinnedEntry {
  readonly name: string
  /** A symlink to a folder counts as a folder: that is how every tool will treat it. */
  readonly isFolder: boolean
}

/** A confined listing: the first entries by name and how many there are in all. */
export interface PinnedListing {
  readonly shown: readonly PinnedEntry[]
  readonly total: number
}

/**
 * Lists the folder at `real` (already checked inside `target.root`) through a pinned handle:
 * the first `max` entries sorted by name (UTF-16 code units), and the total count.
 */
export const listPinned = (target: PinTarget, real: string, max: number): Promise<PinnedListing> =>
  withFolder(target, componentsOf(target.root, real), false, async (dir) => {
    const entries: Dirent[] = await fs.readdir(dir.via, { withFileTypes: true })
    if (!dir.anchored) await confirmHandle(target, dir.handle, dir.real, false)
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    const shown = await Promise.all(
      entries.slice(0, max).map(async (entry) => ({
        name: entry.name,
        isFolder:
          entry.isDirectory() ||
          (entry.isSymbolicLink() &&
            (await fs.stat(entryOf(dir, entry.name)).then(
              (stat) => stat.isDirectory(),
              () => false
            )))
      }))
    )
    return { shown, total: entries.length }
  })

/** A Node-style error carrying `code`, so callers describe it like any other file-system error. */
const fsError = (code: string): NodeJS.ErrnoException => Object.assign(new Error(code), { code })

/**
 * Replaces the file at `real` (already checked inside `target.root`) whole, creating missing
 * parent folders one by one through pinned handles. The content goes to a temporary file
 * created with O_EXCL|O_NOFOLLOW in the pinned parent (same file system, so the rename is
 * atomic) which then takes the target's name in that same folder: a crash mid-write leaves the
 * old file intact, never a half-written one. An existing file's mode is kept, so rewriting a
 * script does not drop its executable bit. A folder at the target fails with EISDIR.
 */
export const writePinned = (target: PinTarget, real: string, content: string): Promise<void> => {
  const components = componentsOf(target.root, real)
  const name = components.pop()
  if (name === undefined) return Promise.reject(fsError('EISDIR'))
  return withFolder(target, components, true, async (dir) => {
    const entry = entryOf(dir, name)
    const existing = await fs.lstat(entry).catch((error: unknown) => {
      if (fsErrorCode(error) === 'ENOENT') return undefined
      throw error
    })
    // The checked path had no symlink here: one now means it was swapped after the check.
    if (existing?.isSymbolicLink() === true) throw target.refuse()
    if (existing?.isDirectory() === true) throw fsError('EISDIR')
    const mode = existing?.isFile() === true ? existing.mode & 0o7777 : undefined
    const temp = entryOf(dir, `.agentvisor-${randomUUID()}.tmp`)
    const handle = await fs.open(temp, CREATE_FLAGS, 0o666)
    try {
      try {
        if (!dir.anchored) await confirmHandle(target, dir.handle, dir.real, false)
        await handle.writeFile(content, 'utf8')
        if (mode !== undefined) await handle.chmod(mode)
      } finally {
        await closeQuietly(handle)
      }
      await fs.rename(temp, entry)
    } catch (error) {
      // unlink never follows a symlink at its last component; the temp is in the pinned folder.
      await fs.unlink(temp).catch(() => undefined)
      throw error
    }
  })
}
