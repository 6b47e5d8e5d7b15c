import { Effect } from 'effect'
import type { FileSystemError, WorkspaceEscapeError } from '../errors.js'
import { listPinnedNow, pinnedCall, readPinnedNow, writePinnedNow, type PinTarget } from './pinned-fs.js'
import type { ListDirArgs, ReadFileArgs, WriteFileArgs } from './tool-arguments.js'
import { describeFsError, escaped, failed, succeeded, type ToolOutcome } from './tool-outcome.js'
import { READ_FILE_MAX_BYTES } from './tool-specs.js'
import { resolveInside, workspaceEscape, type Workspace } from './workspace.js'

/** Beyond this many entries `list_dir` summarises the rest, so one huge folder cannot flood the context. */
const LIST_DIR_MAX_ENTRIES = 1_000

/**
 * The file tools act on the checked real path through pinned folder handles (pinned-fs.ts), so
 * a symlink swapped in after `resolveInside` is refused with the same boundary message. Both
 * the check and the walk are synchronous: a `list_dir` of a small folder answers without a
 * promise or a fiber.
 */
const pinTarget = (ws: Workspace, requested: string): PinTarget => ({
  root: ws.root,
  refuse: () => workspaceEscape(requested)
})

/** Tools never fail: a refusal or a file-system error becomes the outcome the model reads. */
const settled = (
  effect: Effect.Effect<ToolOutcome, WorkspaceEscapeError | FileSystemError>,
  describe: (error: FileSystemError) => ToolOutcome
): Effect.Effect<ToolOutcome> =>
  Effect.catchTags(effect, {
    WorkspaceEscapeError: (error) => Effect.succeed(escaped(error)),
    FileSystemError: (error) => Effect.succeed(describe(error))
  })

/** `read_file`: the file's text, capped at 100 KiB (read synchronously: the cap keeps it small). */
export const readFileTool = (ws: Workspace, args: ReadFileArgs): Effect.Effect<ToolOutcome> => {
  const shown = args.path
  return settled(
    resolveInside(ws, shown, 'read').pipe(
      Effect.flatMap((real) => pinnedCall(shown, () => readPinnedNow(pinTarget(ws, shown), real, READ_FILE_MAX_BYTES))),
      Effect.map((found) => {
        if (found.kind === 'folder') return failed(`${shown} is a folder; use list_dir to see its entries`)
        // A FIFO or device would block or never end: only regular files are read.
        if (found.kind === 'special') return failed(`${shown} is not a regular file`)
        const text = found.head.toString('utf8')
        return found.size > found.head.length
          ? succeeded(`${text}\n\n[read_file: truncated, showing the first ${found.head.length} of ${found.size} bytes]`)
          : succeeded(text)
      })
    ),
    (error) =>
      error.code === 'ENOENT' || error.code === 'ENOTDIR' ? failed(`No such file: ${shown}`) : failed(`Cannot read ${shown}: ${describeFsError(error.cause)}`)
  )
}

/** `write_file`: creates missing parent folders (inside the workspace) and replaces the file atomically. */
export const writeFileTool = (ws: Workspace, args: WriteFileArgs): Effect.Effect<ToolOutcome> =>
  settled(
    resolveInside(ws, args.path, 'write').pipe(
      Effect.flatMap((real) => pinnedCall(args.path, () => writePinnedNow(pinTarget(ws, args.path), real, args.content))),
      Effect.map(() => succeeded(`Wrote ${Buffer.byteLength(args.content, 'utf8')} bytes to ${args.path}`))
    ),
    (error) => failed(error.code === 'EISDIR' ? `Cannot write ${args.path}: it is a folder` : `Cannot write ${args.path}: ${describeFsError(error.cause)}`)
  )

/** `list_dir`: the folder's entries sorted by name, folders suffixed with `/`. */
export const listDirTool = (ws: Workspace, args: ListDirArgs): Effect.Effect<ToolOutcome> => {
  const shown = args.path
  return settled(
    resolveInside(ws, shown, 'read').pipe(
      Effect.flatMap((real) => pinnedCall(shown, () => listPinnedNow(pinTarget(ws, shown), real, LIST_DIR_MAX_ENTRIES))),
      Effect.map((entries) => {
        const names = entries.shown.map((entry) => (entry.isFolder ? `${entry.name}/` : entry.name))
        if (names.length === 0) return succeeded(`${shown} is empty`)
        const rest = entries.total - entries.shown.length
        return succeeded(rest > 0 ? `${names.join('\n')}\n[list_dir: ${rest} more entries not shown]` : names.join('\n'))
      })
    ),
    (error) => {
      if (error.code === 'ENOENT') return failed(`No such folder: ${shown}`)
      if (error.code === 'ENOTDIR') return failed(`${shown} is not a folder`)
      return failed(`Cannot list ${shown}: ${describeFsError(error.cause)}`)
    }
  )
}
