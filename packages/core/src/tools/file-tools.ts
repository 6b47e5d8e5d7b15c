import { randomUUID } from 'node:crypto'
import { promises as fs } from 'node:fs'
import * as path from 'node:path'
import { Effect } from 'effect'
import type { ListDirArgs, ReadFileArgs, WriteFileArgs } from './tool-arguments.js'
import { describeFsError, escaped, failed, fsErrorCode, succeeded, type ToolOutcome } from './tool-outcome.js'
import { READ_FILE_MAX_BYTES } from './tool-specs.js'
import { resolveInside, type Workspace } from './workspace.js'

/** Beyond this many entries `list_dir` summarises the rest, so one huge folder cannot flood the context. */
const LIST_DIR_MAX_ENTRIES = 1_000

/** Reads at most `max` bytes from the start of a file, however large it is. */
const readHead = async (file: string, max: number): Promise<Buffer> => {
  const handle = await fs.open(file, 'r')
  try {
    const buffer = Buffer.alloc(max)
    let filled = 0
    while (filled < max) {
      const { bytesRead } = await handle.read(buffer, filled, max - filled, filled)
      if (bytesRead === 0) break
      filled += bytesRead
    }
    return buffer.subarray(0, filled)
  } finally {
    await handle.close()
  }
}

const readTarget = async (real: string, shown: string): Promise<ToolOutcome> => {
  try {
    const stat = await fs.stat(real)
    if (stat.isDirectory()) return failed(`${shown} is a folder; use list_dir to see its entries`)
    // A FIFO or device would block or never end: only regular files are read.
    if (!stat.isFile()) return failed(`${shown} is not a regular file`)
    const head = await readHead(real, READ_FILE_MAX_BYTES)
    const text = head.toString('utf8')
    return stat.size > head.length
      ? succeeded(`${text}\n\n[read_file: truncated, showing the first ${head.length} of ${stat.size} bytes]`)
      : succeeded(text)
  } catch (error) {
    const code = fsErrorCode(error)
    if (code === 'ENOENT' || code === 'ENOTDIR') return failed(`No such file: ${shown}`)
    return failed(`Cannot read ${shown}: ${describeFsError(error)}`)
  }
}

/** `read_file`: the file's text, capped at 100 KiB. */
export const readFileTool = (ws: Workspace, args: ReadFileArgs): Effect.Effect<ToolOutcome> =>
  resolveInside(ws, args.path, 'read').pipe(
    Effect.flatMap((real) => Effect.promise(() => readTarget(real, args.path))),
    Effect.catchTag('WorkspaceEscapeError', (error) => Effect.succeed(escaped(error)))
  )

/**
 * Replaces `target` whole: the content goes to a temporary file in the same folder (same file
 * system, so `rename` is atomic), which then takes the target's name. A crash mid-write leaves
 * the old file intact, never a half-written one. An existing file's mode is kept, so rewriting a
 * script does not drop its executable bit.
 */
const writeAtomically = async (target: string, content: string): Promise<void> => {
  const dir = path.dirname(target)
  await fs.mkdir(dir, { recursive: true })
  const mode = await fs.stat(target).then(
    (stat) => stat.mode & 0o7777,
    () => undefined
  )
  const temp = path.join(dir, `.agentvisor-${randomUUID()}.tmp`)
  try {
    // `wx` (O_EXCL) refuses to open anything already at the temporary name, a symlink included.
    await fs.writeFile(temp, content, { encoding: 'utf8', flag: 'wx' })
    if (mode !== undefined) await fs.chmod(temp, mode)
    await fs.rename(temp, target)
  } catch (error) {
    await fs.rm(temp, { force: true }).catch(() => undefined)
    throw error
  }
}

const writeTarget = async (real: string, args: WriteFileArgs): Promise<ToolOutcome> => {
  try {
    const existing = await fs.stat(real).catch(() => undefined)
    if (existing?.isDirectory() === true) return failed(`Cannot write ${args.path}: it is a folder`)
    await writeAtomically(real, args.content)
    return succeeded(`Wrote ${Buffer.byteLength(args.content, 'utf8')} bytes to ${args.path}`)
  } catch (error) {
    return failed(`Cannot write ${args.path}: ${describeFsError(error)}`)
  }
}

/** `write_file`: creates missing parent folders (inside the workspace) and replaces the file atomically. */
export const writeFileTool = (ws: Workspace, args: WriteFileArgs): Effect.Effect<ToolOutcome> =>
  resolveInside(ws, args.path, 'write').pipe(
    Effect.flatMap((real) => Effect.promise(() => writeTarget(real, args))),
    Effect.catchTag('WorkspaceEscapeError', (error) => Effect.succeed(escaped(error)))
  )

const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

const listTarget = async (real: string, shown: string): Promise<ToolOutcome> => {
  try {
    const entries = await fs.readdir(real, { withFileTypes: true })
    entries.sort((a, b) => byCodeUnits(a.name, b.name))
    const shownEntries = entries.slice(0, LIST_DIR_MAX_ENTRIES)
    const names = await Promise.all(
      shownEntries.map(async (entry) => {
        // A symlink to a folder is listed as a folder: that is how every tool will treat it.
        const isFolder =
          entry.isDirectory() ||
          (entry.isSymbolicLink() &&
            (await fs.stat(path.join(real, entry.name)).then(
              (stat) => stat.isDirectory(),
              () => false
            )))
        return isFolder ? `${entry.name}/` : entry.name
      })
    )
    if (names.length === 0) return succeeded(`${shown} is empty`)
    const rest = entries.length - shownEntries.length
    return succeeded(rest > 0 ? `${names.join('\n')}\n[list_dir: ${rest} more entries not shown]` : names.join('\n'))
  } catch (error) {
    const code = fsErrorCode(error)
    if (code === 'ENOENT') return failed(`No such folder: ${shown}`)
    if (code === 'ENOTDIR') return failed(`${shown} is not a folder`)
    return failed(`Cannot list ${shown}: ${describeFsError(error)}`)
  }
}

/** `list_dir`: the folder's entries sorted by name, folders suffixed with `/`. */
export const listDirTool = (ws: Workspace, args: ListDirArgs): Effect.Effect<ToolOutcome> =>
  resolveInside(ws, args.path, 'read').pipe(
    Effect.flatMap((real) => Effect.promise(() => listTarget(real, args.path))),
    Effect.catchTag('WorkspaceEscapeError', (error) => Effect.succeed(escaped(error)))
  )
