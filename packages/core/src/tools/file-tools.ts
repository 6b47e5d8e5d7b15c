import { Effect } from 'effect'
import { WorkspaceEscapeError } from '../errors.js'
import { listInsideNow, readInsideNow } from './confined-fs.js'
import { type Eventually, type PinnedListing, type PinnedMissing, type PinnedRead, writePinnedNow } from './pinned-fs.js'
import type { ListDirArgs, ReadFileArgs, WriteFileArgs } from './tool-arguments.js'
import { describeFsError, escaped, failed, fsErrorCode, succeeded, type ToolOutcome } from './tool-outcome.js'
import { READ_FILE_MAX_BYTES } from './tool-specs.js'
import { resolveInsideNow, type Workspace, workspaceEscape } from './workspace.js'

/** Beyond this many entries `list_dir` summarises the rest, so one huge folder cannot flood the context. */
const LIST_DIR_MAX_ENTRIES = 1_000

/**
 * The file tools check the path and act on it through pinned folder handles (confined-fs.ts,
 * pinned-fs.ts), so a symlink swapped in after the check is refused with the same boundary
 * message. The check and the walk are synchronous and a missing file is an answer, not an
 * exception: a `read_file` or a `list_dir` of a small folder answers at once, as a settled
 * outcome, without an Effect, a promise or a fiber of its own.
 */

/**
 * `run`'s answer turned into the model's outcome: at once when `run` answers synchronously (the
 * tool's `run` hands it back settled, and the step goes on without an Effect: tool-definition.ts),
 * or when its promise settles. A refusal becomes the refusal outcome, any other thrown error what
 * `failure` says of it. Tools never fail. `run` is called when the tool runs (runToolCallNow),
 * after the journal's `started` is durable for a journalled tool.
 */
const settled = <A>(
  run: () => Eventually<A>,
  outcome: (found: A) => ToolOutcome,
  failure: (cause: unknown) => ToolOutcome
): ToolOutcome | Effect.Effect<ToolOutcome> => {
  const caught = (cause: unknown): ToolOutcome => (cause instanceof WorkspaceEscapeError ? escaped(cause) : failure(cause))
  let found: Eventually<A>
  try {
    found = run()
  } catch (cause) {
    return caught(cause)
  }
  if (!(found instanceof Promise)) return outcome(found)
  const pending = found
  return Effect.promise(() => pending.then(outcome, caught))
}

/** `read_file`: the file's text, capped at 100 KiB (read synchronously: the cap keeps it small). */
export const readFileTool = (ws: Workspace, args: ReadFileArgs): ToolOutcome | Effect.Effect<ToolOutcome> => {
  const shown = args.path
  const noSuchFile = () => failed(`No such file: ${shown}`)
  return settled(
    () => readInsideNow(ws, shown, READ_FILE_MAX_BYTES),
    (found: PinnedRead) => {
      if (found.kind === 'missing') return noSuchFile()
      if (found.kind === 'folder') return failed(`${shown} is a folder; use list_dir to see its entries`)
      // A FIFO or device would block or never end: only regular files are read.
      if (found.kind === 'special') return failed(`${shown} is not a regular file`)
      const text = found.head.toString('utf8')
      return found.size > found.head.length
        ? succeeded(`${text}\n\n[read_file: truncated, showing the first ${found.head.length} of ${found.size} bytes]`)
        : succeeded(text)
    },
    (cause) => {
      const code = fsErrorCode(cause)
      return code === 'ENOENT' || code === 'ENOTDIR' ? noSuchFile() : failed(`Cannot read ${shown}: ${describeFsError(cause)}`)
    }
  )
}

/** `write_file`: creates missing parent folders (inside the workspace) and replaces the file atomically. */
export const writeFileTool = (ws: Workspace, args: WriteFileArgs): ToolOutcome | Effect.Effect<ToolOutcome> =>
  settled(
    () => {
      const real = resolveInsideNow(ws, args.path)
      if (typeof real !== 'string') throw real
      writePinnedNow({ root: ws.root, refuse: () => workspaceEscape(args.path), held: ws.held }, real, args.content)
    },
    () => succeeded(`Wrote ${Buffer.byteLength(args.content, 'utf8')} bytes to ${args.path}`),
    (cause) => failed(fsErrorCode(cause) === 'EISDIR' ? `Cannot write ${args.path}: it is a folder` : `Cannot write ${args.path}: ${describeFsError(cause)}`)
  )

/** `list_dir`: the folder's entries sorted by name, folders suffixed with `/`. */
export const listDirTool = (ws: Workspace, args: ListDirArgs): ToolOutcome | Effect.Effect<ToolOutcome> => {
  const shown = args.path
  const missing = (code: PinnedMissing['code']): ToolOutcome => (code === 'ENOENT' ? failed(`No such folder: ${shown}`) : failed(`${shown} is not a folder`))
  return settled(
    () => listInsideNow(ws, shown, LIST_DIR_MAX_ENTRIES),
    (entries: PinnedListing | PinnedMissing) => {
      if ('kind' in entries) return missing(entries.code)
      const names = entries.shown.map((entry) => (entry.isFolder ? `${entry.name}/` : entry.name))
      if (names.length === 0) return succeeded(`${shown} is empty`)
      const rest = entries.total - entries.shown.length
      return succeeded(rest > 0 ? `${names.join('\n')}\n[list_dir: ${rest} more entries not shown]` : names.join('\n'))
    },
    (cause) => {
      const code = fsErrorCode(cause)
      return code === 'ENOENT' || code === 'ENOTDIR' ? missing(code) : failed(`Cannot list ${shown}: ${describeFsError(cause)}`)
    }
  )
}
