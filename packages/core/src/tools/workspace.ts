import * as fs from 'node:fs'
import * as path from 'node:path'
import { Effect } from 'effect'
import { WorkspaceError, WorkspaceEscapeError } from '../errors.js'
import { type HeldRootFolder, isInside } from './pinned-fs.js'

/**
 * The folder a run's tools are confined to. `root` is a real path (symlinks resolved), so every
 * containment check compares real paths with real paths.
 */
export interface Workspace {
  readonly root: string
  /** The root folder the run holds open while it runs (root-handle.ts); without it each call opens the root. */
  readonly held?: HeldRootFolder | undefined
}

/** Whether a tool means to read an existing path or to create/replace one. */
export type WorkspacePurpose = 'read' | 'write'

/**
 * Creates the workspace folder if absent (like `mkdir -p`) and pins its real path. Synchronous,
 * like `realpathLoose` below: two system calls of microseconds, where `fs.promises` would queue
 * each behind every other run's in libuv's four-thread pool (a thousand runs starting at once).
 */
export const openWorkspace = (dir: string): Effect.Effect<Workspace, WorkspaceError> =>
  Effect.try({
    try: () => {
      fs.mkdirSync(dir, { recursive: true })
      return { root: fs.realpathSync.native(dir) }
    },
    catch: (cause) =>
      new WorkspaceError({
        path: dir,
        message: `Cannot open workspace ${dir}: ${cause instanceof Error ? cause.message : String(cause)}`,
        cause
      })
  })

/** The refusal every confined tool gives for `requested`, whatever check caught it. */
export const workspaceEscape = (requested: string): WorkspaceEscapeError =>
  new WorkspaceEscapeError({ path: requested, message: `Path escapes the workspace boundary: ${requested}` })

/** Linux's own limit on symlinks followed while resolving one path. */
const MAX_SYMLINK_HOPS = 40

class SymlinkLoop extends Error {}

const errorCode = (error: unknown): string | undefined =>
  typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined

/**
 * `realpath` for a path that may not exist yet: every existing component is resolved, including
 * a dangling symlink, whose text is followed as the OS would follow it when the file is created.
 * Without that, `write_file` through a link to a missing outside file would create that file.
 *
 * Synchronous, like the folder walk in pinned-fs.ts: a few system calls of microseconds each,
 * where each through `fs.promises` would be a round trip through libuv's thread pool. The
 * native realpath is libc's realpath(3), the one `fs.promises.realpath` uses too.
 */
const realpathLoose = (target: string, hops: { count: number }): string => {
  try {
    return fs.realpathSync.native(target)
  } catch (error) {
    const code = errorCode(error)
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error
  }
  const parent = path.dirname(target)
  if (parent === target) return target
  const realParent = realpathLoose(parent, hops)
  const entry = path.join(realParent, path.basename(target))
  let isLink = false
  try {
    isLink = fs.lstatSync(entry).isSymbolicLink()
  } catch {
    // Missing (or unreadable): the entry is where the file would be created.
  }
  if (isLink) {
    hops.count += 1
    if (hops.count > MAX_SYMLINK_HOPS) throw new SymlinkLoop()
    return realpathLoose(path.resolve(realParent, fs.readlinkSync(entry)), hops)
  }
  return entry
}

const SEPARATORS = path.sep === '\\' ? /[\\/]/ : '/'

/**
 * The components below the root that `requested` names, lexically (`.` dropped, `..` taken
 * back), or undefined when it must be refused: an absolute path, a NUL byte, or a `..` that
 * climbs above the root at any point. Checked segment by segment: `a/../../ws/x` leaves the
 * root on the way even though its normalised form may land back inside, and a path that ever
 * points outside is refused. `''` and `'.'` are the root itself (no components).
 */
export const lexicalComponents = (requested: string): string[] | undefined => {
  if (requested.includes('\0') || path.isAbsolute(requested)) return undefined
  const components: string[] = []
  for (const segment of requested.split(SEPARATORS)) {
    if (segment === '..') {
      if (components.pop() === undefined) return undefined
    } else if (segment !== '' && segment !== '.') components.push(segment)
  }
  return components
}

/**
 * Resolves a model-supplied, workspace-relative path to the absolute real path a tool may use.
 *
 * Refused: absolute paths, a `..` that climbs above the root at any point (even if later segments
 * come back), NUL bytes, and any symlink on the way (the last component included, and for a path
 * that does not exist yet its nearest existing ancestor or a dangling link) whose target lies
 * outside. Symlinks that stay inside are followed. `''` and `'.'` are the root itself. When the
 * path cannot be inspected at all (a symlink loop, a permission error) it is refused too: the
 * check fails closed.
 *
 * Reads and writes follow the same rule; `purpose` records the caller's intent and keeps the
 * call sites explicit. Callers must use the returned path, never the requested one, so that the
 * checked path is the one acted on, and act on it through `pinned-fs.ts` (the file tools do), so
 * that a symlink swapped in after this check is refused rather than followed.
 *
 * @example
 * resolveInside(ws, 'src/index.ts', 'read') // Effect succeeding with `${ws.root}/src/index.ts`
 * resolveInside(ws, '../etc/passwd', 'read') // fails: "Path escapes the workspace boundary: ../etc/passwd"
 */
export const resolveInside = (
  ws: Workspace,
  requested: string,
  // biome-ignore lint/correctness/noUnusedFunctionParameters: kept for the call sites' sake, as said above
  purpose: WorkspacePurpose
): Effect.Effect<string, WorkspaceEscapeError> =>
  Effect.suspend(() => {
    const resolved = resolveInsideNow(ws, requested)
    return typeof resolved === 'string' ? Effect.succeed(resolved) : Effect.fail(resolved)
  })

/**
 * `resolveInside` answered at once: the real path, or the refusal as a value.
 *
 * The root is real already (`openWorkspace` resolved it once), so a path none of whose
 * components is a symlink is its own real path: the components are looked at one `lstat` each
 * from the root down, stopping at the first missing one (nothing below it can be a link) or
 * at a file (nothing below it exists). Only a path that meets a symlink is resolved the long
 * way, from that link on (`followLinkInside`).
 */
export const resolveInsideNow = (ws: Workspace, requested: string): string | WorkspaceEscapeError => {
  const components = lexicalComponents(requested)
  if (components === undefined) return workspaceEscape(requested)
  if (components.length === 0) return ws.root
  let at = ws.root
  try {
    for (let i = 0; i < components.length; i++) {
      const parent = at
      at = path.join(parent, components[i]!)
      const seen = fs.lstatSync(at, { throwIfNoEntry: false })
      if (seen === undefined || (!seen.isDirectory() && !seen.isSymbolicLink())) break
      if (seen.isSymbolicLink()) {
        const real = followLinkInside(ws, parent, fs.readlinkSync(at), components.slice(i + 1))
        return real ?? workspaceEscape(requested)
      }
    }
    return path.join(ws.root, ...components)
  } catch {
    return workspaceEscape(requested)
  }
}

/**
 * Where a symlink found in the real folder `parent` leads, its text `text` followed as the OS
 * follows it and the components `rest` of the path below it appended: the real path when it
 * lies inside the workspace, else undefined (outside, a loop, or a path that cannot be
 * inspected: the check fails closed). The link is taken as it was seen, not looked up again.
 */
export const followLinkInside = (ws: Workspace, parent: string, text: string, rest: readonly string[]): string | undefined => {
  // Joined as text, not normalised: a `..` in the link's text is the OS's to resolve, after the links before it.
  const start = path.isAbsolute(text) ? text : `${parent}${path.sep}${text}`
  const full = rest.length === 0 ? start : `${start}${path.sep}${rest.join(path.sep)}`
  try {
    const real = realpathLoose(full, { count: 1 })
    return isInside(ws.root, real) ? real : undefined
  } catch {
    return undefined
  }
}

/** A workspace-relative spelling of an absolute path, for messages shown to the model (`.` for the root). */
export const relativeInside = (ws: Workspace, absolute: string): string => {
  const rel = path.relative(ws.root, absolute)
  return rel === '' ? '.' : rel.split(path.sep).join('/')
}
