import * as fs from 'node:fs'
import { constants } from 'node:fs'
import { closeQuietly, type HeldRootFolder, linkTarget } from './pinned-fs.js'
import type { Workspace } from './workspace.js'

/**
 * A run's workspace root folder held open for the run's life (docs/task-file.md, "Tools offered
 * to the model"). Every confined call and file check starts from the root, opened and checked
 * to be the workspace: with the root held, that is one `readlink` of the held fd instead of an
 * open, a `readlink` and a close (pinned-fs.ts `pinRoot`), half the system calls of a check of
 * a file not written yet.
 *
 * `hold` opens the root with O_DIRECTORY|O_NOFOLLOW and keeps it only if the kernel names it
 * the workspace's real path; `release` closes it. Whoever holds must release (the supervisor
 * does when the run lets go: supervise.ts); a call made while nothing is held opens the root
 * itself, as it would without a handle.
 */
export interface RootHandle extends HeldRootFolder {
  /** Opens and checks the root; nothing is held where it cannot be (no fd links, a root replaced). Never throws. */
  hold(): void
  /** Closes the held root; again, or with nothing held, does nothing. */
  release(): void
}

const DEFAULT_FD_LINKS = '/proc/self/fd'
const ROOT_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW

/** A handle on the real root `root`, nothing held yet. */
export const makeRootHandle = (root: string): RootHandle => {
  const handle = {
    fd: -1,
    via: '',
    hold: () => {
      if (handle.fd >= 0) return
      let fd: number
      try {
        fd = fs.openSync(root, ROOT_FLAGS)
      } catch {
        // Gone or replaced by a link since the run opened it: each call finds out for itself.
        return
      }
      const via = `${DEFAULT_FD_LINKS}/${fd}`
      if (linkTarget(via) !== root) {
        closeQuietly(fd)
        return
      }
      handle.via = via
      handle.fd = fd
    },
    release: () => {
      const fd = handle.fd
      if (fd < 0) return
      // Marked first: a call after this opens the root itself, never a reused fd number. A
      // listing of a large root still reading through `via` (pinned-fs.ts) belongs to a run
      // that has let go: its fiber is gone and what it reads is dropped.
      handle.fd = -1
      handle.via = ''
      closeQuietly(fd)
    }
  }
  return handle
}

/**
 * `ws` with a root handle of its own, not yet held: the run's tools and checks use the held
 * root once `hold` was called, until `release`.
 */
export const withRootHandle = (ws: Workspace): { readonly workspace: Workspace; readonly handle: RootHandle } => {
  const handle = makeRootHandle(ws.root)
  return { workspace: { root: ws.root, held: handle }, handle }
}
