import { randomUUID } from 'node:crypto'
import * as fs from 'node:fs'
import { constants, type Dirent, type Stats } from 'node:fs'
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
 * is read comes from the checked handle), but a write still names its target by path, so
 * there it only narrows the window.
 *
 * The walk is synchronous (`openSync`, `readlinkSync`, `fstatSync`, `closeSync`): each of those
 * calls takes a few microseconds, while the same call through `fs.promises` is a round trip
 * through libuv's thread pool that costs more than the work, and a `list_dir` makes a dozen of
 * them. Only contents that can be large go asynchronous: a listing of a big folder and a whole
 * file read past `SYNC_READ_MAX_BYTES`, so that one call never stalls every other run of the
 * process for long. That is why the `...Now` functions answer either at once or with a promise.
 *
 * A missing file is an answer, not an exception: the last component is looked at with
 * `lstat`'s `throwIfNoEntry: false`, since every error Node throws from a file-system call
 * captures a full stack, which costs far more than the call itself.
 */

const FOLDER_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW
// O_NONBLOCK: a FIFO swapped in after the lstat must not block the open.
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW

/** A whole-file read up to this size is done synchronously (a page-cache copy); larger ones are not. */
const SYNC_READ_MAX_BYTES = 1024 * 1024
/**
 * A folder whose own size is up to this is listed synchronously. Linux file systems report a
 * folder's size growing with its entries (ext4 by 4 KiB blocks of names, tmpfs 20 bytes an
 * entry, btrfs the names' bytes): 64 KiB is a couple of thousand entries.
 */
const SYNC_LIST_MAX_FOLDER_BYTES = 64 * 1024

/** A result now, or a promise of it when the work is too large to do without yielding. */
export type Eventually<A> = A | Promise<A>

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
export interface PinnedFolder {
  readonly fd: number
  /** `/proc/self/fd/N` when anchored; otherwise the folder's real path. */
  readonly via: string
  /** The real path the folder was checked at. */
  readonly real: string
  /** Whether `via` is a magic link to `fd` (Linux) rather than a path string. */
  readonly anchored: boolean
  /** The run's held workspace root (root-handle.ts): its owner closes it, never a call. */
  readonly held?: true
  /** Its size as the `lstat` of the walk that opened it saw it, where one did. */
  readonly size?: number | undefined
}

/** What the caller needs: the root the path must stay in and how to refuse. */
export interface PinTarget {
  readonly root: string
  readonly refuse: () => WorkspaceEscapeError
  readonly options?: PinOptions | undefined
  /** The workspace root the run holds open (root-handle.ts), if it holds one. */
  readonly held?: HeldRootFolder | undefined
}

/** The part of a run's held root (root-handle.ts) a walk reads: `fd` is -1 while none is held. */
export interface HeldRootFolder {
  readonly fd: number
  /** `/proc/self/fd/<fd>` while held. */
  readonly via: string
}

export const entryOf = (dir: PinnedFolder, name: string): string => `${dir.via}/${name}`

const sameInode = (a: Stats, b: Stats): boolean => a.dev === b.dev && a.ino === b.ino

/** The answer of `run`, or undefined when it throws: for looks whose failure means "not confirmed". */
const orUndefined = <A>(run: () => A): A | undefined => {
  try {
    return run()
  } catch {
    return undefined
  }
}

/** The path the fd link `link` stands for, or undefined where it does not exist. */
export const linkTarget = (link: string): string | undefined => {
  try {
    return fs.readlinkSync(link)
  } catch {
    return undefined
  }
}

/** The path `fd` stands for, or undefined where the fd links do not exist. */
const fdPath = (fd: number, options: PinOptions | undefined): string | undefined => linkTarget(`${options?.fdLinks ?? DEFAULT_FD_LINKS}/${fd}`)

/**
 * Checks an opened fd against the real path it was meant to be: anchored, the kernel's own
 * name for the fd must lie inside the root; otherwise the inode at `real` must be the fd's.
 * Anything that cannot be confirmed is refused.
 */
export const confirmHandle = (target: PinTarget, fd: number, real: string, anchored: boolean): void => {
  if (anchored) {
    const actual = fdPath(fd, target.options)
    if (actual === undefined || !isInside(target.root, actual)) throw target.refuse()
    return
  }
  const opened = fs.fstatSync(fd)
  const current = orUndefined(() => fs.statSync(real))
  // The native realpath (libc's realpath(3)), as fs.promises.realpath uses, not Node's JS walk.
  const resolved = orUndefined(() => fs.realpathSync.native(real))
  if (current === undefined || resolved !== real || !sameInode(opened, current)) throw target.refuse()
}

export const closeQuietly = (fd: number): void => {
  try {
    fs.closeSync(fd)
  } catch {
    // Closing can only fail on an fd that is already gone: nothing is left to release.
  }
}

/** Closes a folder a call opened; the run's held root stays open for the next call. */
export const closeFolder = (dir: PinnedFolder): void => {
  if (dir.held !== true) closeQuietly(dir.fd)
}

/** Whether `entry` is now a symlink: an open that failed on it means it was swapped after the check. */
const isSymlink = (entry: string): boolean => orUndefined(() => fs.lstatSync(entry).isSymbolicLink()) === true

/** Creates folder `entry`; one that exists already (a concurrent creation) is as good. */
const mkdirIfMissing = (entry: string): void => {
  try {
    fs.mkdirSync(entry)
  } catch (error) {
    if (fsErrorCode(error) !== 'EEXIST') throw error
  }
}

/** Opens `name` inside `parent` as a folder, creating it first when asked; a symlink there is refused. */
const openChildFolder = (target: PinTarget, parent: PinnedFolder, name: string, create: boolean): number => {
  const entry = entryOf(parent, name)
  try {
    return fs.openSync(entry, FOLDER_FLAGS)
  } catch (error) {
    const code = fsErrorCode(error)
    if (code === 'ENOENT' && create) {
      // mkdir never follows a symlink at its last component (EEXIST), so it cannot create outside.
      mkdirIfMissing(entry)
      return openChildFolder(target, parent, name, false)
    }
    // O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR (or ELOOP): tell that from a plain file.
    if ((code === 'ENOTDIR' || code === 'ELOOP') && isSymlink(entry)) throw target.refuse()
    throw error
  }
}

/**
 * Without fd links, missing folders are created by path one at a time, each only after its
 * parent was seen to be a real folder inside: `mkdir -p` would follow a swapped symlink.
 * A swap between that look and the `mkdir` still wins; see the module comment.
 */
const makeFoldersByPath = (target: PinTarget, components: readonly string[]): void => {
  let current = target.root
  for (const name of components) {
    const next = path.join(current, name)
    let seen: Stats | undefined
    try {
      seen = fs.lstatSync(next)
    } catch (error) {
      if (fsErrorCode(error) !== 'ENOENT') throw error
    }
    if (seen?.isSymbolicLink() === true) throw target.refuse()
    if (seen === undefined) {
      if (fs.realpathSync.native(current) !== current) throw target.refuse()
      mkdirIfMissing(next)
    }
    current = next
  }
}

/**
 * The workspace root held open and checked to be the root (its own path could have been
 * redirected on the way to it: a workspace folder replaced under a run), or undefined where
 * there are no fd links (not Linux). The caller closes it with `closeFolder`.
 *
 * A run that holds its root (root-handle.ts) has it checked with one `readlink`, where opening
 * it takes an open, a `readlink` and a close: the kernel must still name the held folder the
 * workspace. One that it no longer does (the folder moved away, replaced, removed) is not used:
 * the root is opened by its path and checked as without a held one, so a call sees what a run
 * that holds nothing would see.
 */
export const pinRoot = (target: PinTarget): PinnedFolder | undefined => {
  const held = target.held
  if (held !== undefined && held.fd >= 0 && target.options?.fdLinks === undefined && linkTarget(held.via) === target.root) {
    return { fd: held.fd, via: held.via, real: target.root, anchored: true, held: true }
  }
  const rootFd = fs.openSync(target.root, constants.O_RDONLY | constants.O_DIRECTORY)
  const rootLink = fdPath(rootFd, target.options)
  if (rootLink === undefined) {
    closeQuietly(rootFd)
    return undefined
  }
  if (rootLink !== target.root) {
    closeQuietly(rootFd)
    throw target.refuse()
  }
  return { fd: rootFd, via: `${target.options?.fdLinks ?? DEFAULT_FD_LINKS}/${rootFd}`, real: target.root, anchored: true }
}

/**
 * Opens folder `name` inside the pinned `parent`, creating it first when asked and missing; a
 * symlink there is refused. The caller closes both.
 */
export const openFolderIn = (target: PinTarget, parent: PinnedFolder, name: string, create = false, size?: number): PinnedFolder => {
  const fd = openChildFolder(target, parent, name, create)
  return { fd, via: `${target.options?.fdLinks ?? DEFAULT_FD_LINKS}/${fd}`, real: path.join(parent.real, name), anchored: true, size }
}

/**
 * Opens the folder at real path `root/components...`, each component relative to the previous
 * folder's fd, creating missing ones when `create` is set. The result is confirmed inside the
 * root; the caller closes it.
 */
const pinFolder = (target: PinTarget, components: readonly string[], create: boolean): PinnedFolder => {
  const real = path.join(target.root, ...components)
  const root = pinRoot(target)
  if (root === undefined) {
    // No fd links: open the folder by its path and check the fd against it afterwards.
    if (create) makeFoldersByPath(target, components)
    let fd: number
    try {
      fd = fs.openSync(real, FOLDER_FLAGS)
    } catch (error) {
      const code = fsErrorCode(error)
      if ((code === 'ENOTDIR' || code === 'ELOOP') && isSymlink(real)) throw target.refuse()
      throw error
    }
    try {
      confirmHandle(target, fd, real, false)
    } catch (error) {
      closeQuietly(fd)
      throw error
    }
    return { fd, via: real, real, anchored: false }
  }
  let current: PinnedFolder = root
  try {
    for (const name of components) {
      const next = openFolderIn(target, current, name, create)
      closeFolder(current)
      current = next
    }
    // A folder renamed out of the workspace while it was held open is caught here (the root
    // itself was just checked by pinRoot).
    if (current !== root) confirmHandle(target, current.fd, current.real, true)
    return current
  } catch (error) {
    closeFolder(current)
    throw error
  }
}

/** The components of `real` below the root; empty for the root itself. */
const componentsOf = (root: string, real: string): string[] => {
  const rel = path.relative(root, real)
  return rel === '' ? [] : rel.split(path.sep)
}

/** Runs `use` on the pinned folder and closes it once `use` is done, at once or when its promise settles. */
const withFolder = <A>(target: PinTarget, components: readonly string[], create: boolean, use: (dir: PinnedFolder) => Eventually<A>): Eventually<A> =>
  usingFolder(pinFolder(target, components, create), use)

/** Runs `use` on `dir`, already open, and closes it once `use` is done, at once or when its promise settles. */
export const usingFolder = <A>(dir: PinnedFolder, use: (dir: PinnedFolder) => Eventually<A>): Eventually<A> => {
  let result: Eventually<A>
  try {
    result = use(dir)
  } catch (error) {
    closeFolder(dir)
    throw error
  }
  if (result instanceof Promise) return result.finally(() => closeFolder(dir))
  closeFolder(dir)
  return result
}

/** A promise of what `run` answers, now or later; a synchronous throw becomes a rejection. */
const promised = <A>(run: () => Eventually<A>): Promise<A> => {
  try {
    return Promise.resolve(run())
  } catch (error) {
    return Promise.reject(error)
  }
}

/** Nothing at the path: ENOENT, or ENOTDIR when a file stands where a folder of the path would be. */
export interface PinnedMissing {
  readonly kind: 'missing'
  readonly code: 'ENOENT' | 'ENOTDIR'
}

export const MISSING: PinnedMissing = { kind: 'missing', code: 'ENOENT' }
export const NOT_A_FOLDER: PinnedMissing = { kind: 'missing', code: 'ENOTDIR' }

/** What a confined read found at the path. */
export type PinnedRead =
  | { readonly kind: 'file'; readonly head: Buffer; readonly size: number }
  | { readonly kind: 'folder' }
  | { readonly kind: 'special' }
  | PinnedMissing

const FOLDER: PinnedRead = { kind: 'folder' }
const SPECIAL: PinnedRead = { kind: 'special' }

/**
 * `lstat` of `entry` without an exception for a missing one; a look that fails otherwise (a
 * permission error) is refused like a path that cannot be resolved: the check fails closed.
 */
export const lookAt = (target: PinTarget, entry: string): Stats | undefined => {
  try {
    return fs.lstatSync(entry, { throwIfNoEntry: false })
  } catch {
    throw target.refuse()
  }
}

/** Reads at most `max` bytes from the start of an open file, however large it is. */
const readHead = (fd: number, max: number): Buffer => {
  const buffer = Buffer.allocUnsafe(max)
  let filled = 0
  while (filled < max) {
    const bytesRead = fs.readSync(fd, buffer, filled, max - filled, filled)
    if (bytesRead === 0) break
    filled += bytesRead
  }
  return buffer.subarray(0, filled)
}

/** The whole of an open file, through the thread pool: it is too large to copy while everything waits. */
const readWholeLater = (fd: number): Promise<Buffer> =>
  new Promise((resolve, reject) => fs.readFile(fd, (error, data) => (error === null ? resolve(data) : reject(error))))

/**
 * Reads the file at `real` (already checked inside `target.root`) through pinned folders: at
 * most `max` bytes, or all of it when `max` is undefined. Throws the target's escape error when
 * the path was swapped to lead elsewhere, and Node's file-system errors otherwise; nothing at
 * the path (ENOENT, or ENOTDIR on the way) is answered `missing`. Answers at once, unless a
 * whole file larger than 1 MiB is read: then with a promise.
 */
export const readPinnedNow = (target: PinTarget, real: string, max: number | undefined): Eventually<PinnedRead> => {
  const components = componentsOf(target.root, real)
  const name = components.pop()
  if (name === undefined) return FOLDER
  return missingAsValue(() => withFolder(target, components, false, (dir) => readEntryNow(target, dir, name, lookAt(target, entryOf(dir, name)), max)))
}

/**
 * `run`'s answer, a folder of the path found missing (ENOENT) or a file (ENOTDIR) on the way
 * answered as `missing` like a missing last component. Only a path resolved the long way (a
 * symlink on it, or no fd links) walks folders it has not looked at first, so only there is an
 * error thrown and caught.
 */
const missingAsValue = <A>(run: () => Eventually<A>): Eventually<A | PinnedMissing> => {
  try {
    return run()
  } catch (error) {
    const code = fsErrorCode(error)
    if (code === 'ENOENT') return MISSING
    if (code === 'ENOTDIR') return NOT_A_FOLDER
    throw error
  }
}

/** Reads at most `size` bytes of an open file: its size when known, else (0: a file that reports none) up to `max` or to its end. */
const readOpened = (fd: number, size: number, max: number | undefined): Buffer => {
  if (size > 0) return readHead(fd, max === undefined ? size : Math.min(max, size))
  return max === undefined ? fs.readFileSync(fd) : readHead(fd, max)
}

/**
 * Reads `name` in the pinned folder `dir`, which `seen` (its `lstat`, undefined when missing)
 * describes; a symlink there is refused (the path was checked without one).
 */
export const readEntryNow = (target: PinTarget, dir: PinnedFolder, name: string, seen: Stats | undefined, max: number | undefined): Eventually<PinnedRead> => {
  if (seen === undefined) return MISSING
  const entry = entryOf(dir, name)
  // Looked at before opening so that a FIFO or device is never opened at all.
  if (seen.isSymbolicLink()) throw target.refuse()
  if (seen.isDirectory()) return FOLDER
  if (!seen.isFile()) return SPECIAL
  let fd: number
  try {
    fd = fs.openSync(entry, READ_FLAGS)
  } catch (error) {
    if (fsErrorCode(error) === 'ELOOP' || isSymlink(entry)) throw target.refuse()
    throw error
  }
  const opened = fd
  let later: Promise<PinnedRead> | undefined
  try {
    confirmHandle(target, fd, path.join(dir.real, name), dir.anchored)
    const stat = fs.fstatSync(fd)
    if (stat.isDirectory()) return FOLDER
    if (!stat.isFile()) return SPECIAL
    if (max !== undefined || stat.size <= SYNC_READ_MAX_BYTES) return { kind: 'file', head: readOpened(fd, stat.size, max), size: stat.size }
    later = readWholeLater(fd).then((head) => ({ kind: 'file', head, size: stat.size }))
    return later.finally(() => closeQuietly(opened))
  } finally {
    if (later === undefined) closeQuietly(fd)
  }
}

/** `readPinnedNow` as a promise. */
export const readPinned = (target: PinTarget, real: string, max: number | undefined): Promise<PinnedRead> => promised(() => readPinnedNow(target, real, max))

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

const byName = (a: Dirent, b: Dirent): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

/** The listing of `entries` read from `dir`, checked afterwards when `dir` is not anchored. */
const listingOf = (target: PinTarget, dir: PinnedFolder, entries: Dirent[], max: number): PinnedListing => {
  if (!dir.anchored) confirmHandle(target, dir.fd, dir.real, false)
  entries.sort(byName)
  const shown = entries.slice(0, max).map((entry) => ({
    name: entry.name,
    isFolder: entry.isDirectory() || (entry.isSymbolicLink() && orUndefined(() => fs.statSync(entryOf(dir, entry.name)).isDirectory()) === true)
  }))
  return { shown, total: entries.length }
}

/**
 * Lists the folder at `real` (already checked inside `target.root`) through a pinned fd: the
 * first `max` entries sorted by name (UTF-16 code units), and the total count; `missing` when
 * there is no folder there (ENOENT, or ENOTDIR: a file). Answers at once, unless the folder is
 * large: then with a promise.
 */
export const listPinnedNow = (target: PinTarget, real: string, max: number): Eventually<PinnedListing | PinnedMissing> =>
  missingAsValue(() => withFolder(target, componentsOf(target.root, real), false, (dir) => listFolderNow(target, dir, max)))

/**
 * Lists the pinned folder `dir`: at once, unless it is large: then with a promise. The size
 * only picks the way, so the walk's `lstat` of the folder, where it made one, is as good as an
 * `fstat` of the opened fd (a folder can grow between either look and the listing).
 */
export const listFolderNow = (target: PinTarget, dir: PinnedFolder, max: number): Eventually<PinnedListing> => {
  if ((dir.size ?? fs.fstatSync(dir.fd).size) <= SYNC_LIST_MAX_FOLDER_BYTES) {
    return listingOf(target, dir, fs.readdirSync(dir.via, { withFileTypes: true }), max)
  }
  return fs.promises.readdir(dir.via, { withFileTypes: true }).then((entries) => listingOf(target, dir, entries, max))
}

/** `listPinnedNow` as a promise. */
export const listPinned = (target: PinTarget, real: string, max: number): Promise<PinnedListing | PinnedMissing> =>
  promised(() => listPinnedNow(target, real, max))

/** A Node-style error carrying `code`, so callers describe it like any other file-system error. */
const fsError = (code: string): NodeJS.ErrnoException => Object.assign(new Error(code), { code })

/**
 * Replaces the file at `real` (already checked inside `target.root`) whole, creating missing
 * parent folders one by one through pinned fds. The content goes to a temporary file
 * created with O_EXCL|O_NOFOLLOW in the pinned parent (same file system, so the rename is
 * atomic) which then takes the target's name in that same folder: a crash mid-write leaves the
 * old file intact, never a half-written one. An existing file's mode is kept, so rewriting a
 * script does not drop its executable bit. A folder at the target fails with EISDIR.
 *
 * Synchronous, content included: the content is a tool call's argument, already in memory
 * and bounded by what a model writes in one reply, and writing it is a copy into the page
 * cache (nothing is synced to disk).
 */
export const writePinnedNow = (target: PinTarget, real: string, content: string): void => {
  const components = componentsOf(target.root, real)
  const name = components.pop()
  if (name === undefined) throw fsError('EISDIR')
  withFolder(target, components, true, (dir) => {
    const entry = entryOf(dir, name)
    const existing = fs.lstatSync(entry, { throwIfNoEntry: false })
    // The checked path had no symlink here: one now means it was swapped after the check.
    if (existing?.isSymbolicLink() === true) throw target.refuse()
    if (existing?.isDirectory() === true) throw fsError('EISDIR')
    const mode = existing?.isFile() === true ? existing.mode & 0o7777 : undefined
    const temp = entryOf(dir, `.agentvisor-${randomUUID()}.tmp`)
    const fd = fs.openSync(temp, CREATE_FLAGS, 0o666)
    try {
      try {
        if (!dir.anchored) confirmHandle(target, dir.fd, dir.real, false)
        fs.writeFileSync(fd, content, 'utf8')
        if (mode !== undefined) fs.fchmodSync(fd, mode)
      } finally {
        closeQuietly(fd)
      }
      fs.renameSync(temp, entry)
    } catch (error) {
      // unlink never follows a symlink at its last component; the temp is in the pinned folder.
      orUndefined(() => fs.unlinkSync(temp))
      throw error
    }
  })
}

/** `writePinnedNow` as a promise. */
export const writePinned = (target: PinTarget, real: string, content: string): Promise<void> => promised(() => writePinnedNow(target, real, content))
