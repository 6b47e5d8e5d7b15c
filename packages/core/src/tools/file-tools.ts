import { Effect } from 'effect'
import { WorkspaceEscapeError } from '../errors.js'
import { listPinned, readPinned, writePinned, type PinTarget } from './pinned-fs.js'
import type { ListDirArgs, ReadFileArgs, WriteFileArgs } from './tool-arguments.js'
import { describeFsError, escaped, failed, fsErrorCode, succeeded, type ToolOutcome } from './tool-outcome.js'
import { READ_FILE_MAX_BYTES } from './tool-specs.js'
import { resolveInside, workspaceEscape, type Workspace } from './workspace.js'

/** Beyond this many entries `list_dir` summarises the rest, so one huge folder cannot flood the context. */
const LIST_DIR_MAX_ENTRIES = 1_000

/**
 * The file tools act on the checked real path through pinned folder handles (pinned-fs.ts), so
 * a symlink swapped in after `resolveInside` is refused with the same boundary message.
 */
const pinTarget = (ws: Workspace, requested: string): PinTarget => ({
  root: ws.root,
  refuse: () => workspaceEscape(requested)
})

const readTarget = async (ws: Workspace, real: string, shown: string): Promise<ToolOutcome> => {
  try {
    const found = await readPinned(pinTarget(ws, shown), real, READ_FILE_MAX_BYTES)
    if (found.kind === 'folder') return failed(`${shown} is a folder; use list_dir to see its entries`)
    // A FIFO or device would block or never end: only regular files are read.
    if (found.kind === 'special') return failed(`${shown} is not a regular file`)
    const text = found.head.toString('utf8')
    return found.size > found.head.length
      ? succeeded(`${text}\n\n[read_file: truncated, showing the first ${found.head.length} of ${found.size} bytes]`)
      : succeeded(text)
  } catch (error) {
    if (error instanceof WorkspaceEscapeError) return escaped(error)
    const code = fsErrorCode(error)
    if (code === 'ENOENT' || code === 'ENOTDIR') return failed(`No such file: ${shown}`)
    return failed(`Cannot read ${shown}: ${describeFsError(error)}`)
  }
}

/** `read_file`: the file's text, capped at 100 KiB. */
export const readFileTool = (ws: Workspace, args: ReadFileArgs): Effect.Effect<ToolOutcome> =>
  resolveInside(ws, args.path, 'read').pipe(
    Effect.flatMap((real) => Effect.promise(() => readTarget(ws, real, args.path))),
    Effect.catchTag('WorkspaceEscapeError', (error) => Effect.succeed(escaped(error)))
  )

const writeTarget = async (ws: Workspace, real: string, args: WriteFileArgs): Promise<ToolOutcome> => {
  try {
    await writePinned(pinTarget(ws, args.path), real, args.content)
    return succeeded(`Wrote ${Buffer.byteLength(args.content, 'utf8')} bytes to ${args.path}`)
  } catch (error) {
    if (error instanceof WorkspaceEscapeError) return escaped(error)
    if (fsErrorCode(error) === 'EISDIR') return failed(`Cannot write ${args.path}: it is a folder`)
    return failed(`Cannot write ${args.path}: ${describeFsError(error)}`)
  }
}

/** `write_file`: creates missing parent folders (inside the workspace) and replaces the file atomically. */
export const writeFileTool = (ws: Workspace, args: WriteFileArgs): Effect.Effect<ToolOutcome> =>
  resolveInside(ws, args.path, 'write').pipe(
    Effect.flatMap((real) => Effect.promise(() => writeTarget(ws, real, args))),
    Effect.catchTag('WorkspaceEscapeError', (error) => Effect.succeed(escaped(error)))
  )

const listTarget = async (ws: Workspace, real: string, shown: string): Promise<ToolOutcome> => {
  try {
    const entries = await listPinned(pinTarget(ws, shown), real, LIST_DIR_MAX_ENTRIES)
    const names = entries.shown.map((entry) => (entry.isFolder ? `${entry.name}/` : entry.name))
    if (names.length === 0) return succeeded(`${shown} is empty`)
    const rest = entries.total - entries.shown.length
    return succeeded(rest > 0 ? `${names.join('\n')}\n[list_dir: ${rest} more entries not shown]` : names.join('\n'))
  } catch (error) {
    if (error instanceof WorkspaceEscapeError) return escaped(error)
    const code = fsErrorCode(error)
    if (code === 'ENOENT') return failed(`No such folder: ${shown}`)
    if (code === 'ENOTDIR') return failed(`${shown} is not a folder`)
    return failed(`Cannot list ${shown}: ${describeFsError(error)}`)
  }
}

/** `list_dir`: the folder's entries sorted by name, folders suffixed with `/`. */
export const listDirTool = (ws: Workspace, args: ListDirArgs): Effect.Effect<ToolOutcome> =>
  resolveInside(ws, args.path, 'read').pipe(
    Effect.flatMap((real) => Effect.promise(() => listTarget(ws, real, args.path))),
    Effect.catchTag('WorkspaceEscapeError', (error) => Effect.succeed(escaped(error)))
  )
