import * as fs from 'node:fs'
import {
  closeFolder,
  confirmHandle,
  type Eventually,
  entryOf,
  listFolderNow,
  listPinnedNow,
  lookAt,
  MISSING,
  NOT_A_FOLDER,
  openFolderIn,
  type PinnedFolder,
  type PinnedListing,
  type PinnedMissing,
  type PinnedRead,
  type PinOptions,
  type PinTarget,
  pinRoot,
  readEntryNow,
  readPinnedNow,
  usingFolder
} from './pinned-fs.js'
import { followLinkInside, lexicalComponents, resolveInsideNow, type Workspace, workspaceEscape } from './workspace.js'

/**
 * Reading and listing a model-supplied workspace path in one walk (docs/task-file.md, "Tools
 * offered to the model"): the path check of `resolveInside` and the pinned folder walk of
 * pinned-fs.ts done together, so a call costs the system calls of the walk and no more.
 *
 * The root is real (`openWorkspace` resolved it once) and is opened and checked as pinned-fs.ts
 * does (where the run holds it open, root-handle.ts, its held handle is checked instead). Below
 * it each component is looked at (`lstat` through the pinned parent) before it is opened with
 * O_NOFOLLOW: while none is a symlink, the lexical path is its own real path, so
 * it is the resolved path and the walk is the pinned walk of it. A missing component answers
 * `missing` at once, without an exception (no error object with a stack is built for the
 * answer a check of a file not yet written gives every step). The first symlink met ends the
 * walk: the path is then resolved the long way (`resolveInsideNow`, which follows links that
 * stay inside and refuses the others) and the resolved path walked as pinned-fs.ts walks a
 * checked path, refusing any symlink swapped in since.
 *
 * Refusals are thrown as the target's `WorkspaceEscapeError`, other file-system errors as
 * Node's; the callers turn both into what the model reads.
 */

/** Where a walk that met a symlink found the path leads: its real path inside, to be walked as checked. */
interface Resolved {
  readonly resolved: string
}

/** What `walkFolders` answers where there are no fd links (not Linux): the path is resolved and walked apart. */
const NO_FD_LINKS: unique symbol = Symbol('no fd links')

/** The target for `requested` in `ws`, refusing with the boundary message naming it. */
const targetOf = (ws: Workspace, requested: string, options: PinOptions | undefined): PinTarget => ({
  root: ws.root,
  refuse: () => workspaceEscape(requested),
  options,
  held: ws.held
})

/**
 * Follows the symlink `name` seen in the pinned folder `dir`, the components `rest` below it:
 * where it leads when that is inside, else the refusal thrown. The link is read where it was
 * seen; one that is no longer a link by then is resolved again from the root.
 */
const followLink = (ws: Workspace, target: PinTarget, requested: string, dir: PinnedFolder, name: string, rest: readonly string[]): Resolved => {
  let text: string
  try {
    text = fs.readlinkSync(entryOf(dir, name))
  } catch {
    return { resolved: resolvedOf(ws, requested) }
  }
  const resolved = followLinkInside(ws, dir.real, text, rest)
  if (resolved === undefined) throw target.refuse()
  return { resolved }
}

/**
 * Opens the pinned root, then each of the first `folders` components below it, each looked at
 * first: the last folder opened (the caller closes it), `missing` (nothing left open), where a
 * symlink on the way leads, or NO_FD_LINKS. A folder other than the root is confirmed inside
 * once reached.
 */
const walkFolders = (
  ws: Workspace,
  target: PinTarget,
  requested: string,
  components: readonly string[],
  folders: number
): PinnedFolder | PinnedMissing | Resolved | typeof NO_FD_LINKS => {
  const root = pinRoot(target)
  if (root === undefined) return NO_FD_LINKS
  let current = root
  try {
    for (let i = 0; i < folders; i++) {
      const name = components[i]!
      const seen = lookAt(target, entryOf(current, name))
      if (seen === undefined || !(seen.isDirectory() || seen.isSymbolicLink())) {
        closeFolder(current)
        return seen === undefined ? MISSING : NOT_A_FOLDER
      }
      if (seen.isSymbolicLink()) {
        const resolved = followLink(ws, target, requested, current, name, components.slice(i + 1))
        closeFolder(current)
        return resolved
      }
      const next = openFolderIn(target, current, name, false, seen.size)
      closeFolder(current)
      current = next
    }
    // A folder renamed out of the workspace while it was held open is caught here.
    if (current !== root) confirmHandle(target, current.fd, current.real, true)
    return current
  } catch (error) {
    closeFolder(current)
    throw error
  }
}

/** The components of `requested`, or the refusal thrown. */
const componentsOf = (target: PinTarget, requested: string): string[] => {
  const components = lexicalComponents(requested)
  if (components === undefined) throw target.refuse()
  return components
}

/** `requested` resolved apart from any walk (symlinks inside followed), or the refusal thrown. */
const resolvedOf = (ws: Workspace, requested: string): string => {
  const resolved = resolveInsideNow(ws, requested)
  if (typeof resolved !== 'string') throw resolved
  return resolved
}

const FOLDER: PinnedRead = { kind: 'folder' }

/**
 * Reads the workspace file `requested` (model-supplied, workspace-relative): at most `max`
 * bytes, or all of it when `max` is undefined, as `readPinnedNow` answers (`missing` when
 * there is nothing at the path). At once, unless a whole file past 1 MiB is read.
 */
export const readInsideNow = (ws: Workspace, requested: string, max: number | undefined, options?: PinOptions): Eventually<PinnedRead> => {
  const target = targetOf(ws, requested, options)
  const components = componentsOf(target, requested)
  const last = components.length - 1
  if (last < 0) return FOLDER
  const dir = walkFolders(ws, target, requested, components, last)
  if (dir === NO_FD_LINKS) return readPinnedNow(target, resolvedOf(ws, requested), max)
  if ('resolved' in dir) return readPinnedNow(target, dir.resolved, max)
  if (!('fd' in dir)) return dir
  const name = components[last]!
  return usingFolder(dir, () => {
    const seen = lookAt(target, entryOf(dir, name))
    if (seen?.isSymbolicLink() !== true) return readEntryNow(target, dir, name, seen, max)
    return readPinnedNow(target, followLink(ws, target, requested, dir, name, []).resolved, max)
  })
}

/** Lists the workspace folder `requested` as `listPinnedNow` does, or answers `missing` (ENOTDIR: not a folder). */
export const listInsideNow = (ws: Workspace, requested: string, max: number, options?: PinOptions): Eventually<PinnedListing | PinnedMissing> => {
  const target = targetOf(ws, requested, options)
  const components = componentsOf(target, requested)
  const dir = walkFolders(ws, target, requested, components, components.length)
  if (dir === NO_FD_LINKS) return listPinnedNow(target, resolvedOf(ws, requested), max)
  if ('resolved' in dir) return listPinnedNow(target, dir.resolved, max)
  if (!('fd' in dir)) return dir
  return usingFolder(dir, () => listFolderNow(target, dir, max))
}
