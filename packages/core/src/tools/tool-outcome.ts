import type { WorkspaceEscapeError } from '../errors.js'

/**
 * What a tool call produced, as fed back to the model. `ok: false` covers every problem (bad
 * arguments, unknown tool, refusal, missing file, failing command): tools never throw, so a bad
 * call costs the model a step, not the run. `refusal` names the rule and layer that refused it.
 */
export interface ToolOutcome {
  readonly ok: boolean
  readonly output: string
  readonly refusal?: { readonly rule: string; readonly layer: string } | undefined
}

export const succeeded = (output: string): ToolOutcome => ({ ok: true, output })

export const failed = (output: string): ToolOutcome => ({ ok: false, output })

/**
 * A workspace escape, recorded as a refusal by the `workspace` rule of the `sandbox` layer
 * (docs/task-file.md). Only the boundary message is returned: nothing of the refused target.
 */
export const escaped = (error: WorkspaceEscapeError): ToolOutcome => ({
  ok: false,
  output: error.message,
  refusal: { rule: 'workspace', layer: 'sandbox' }
})

/** The error code of a Node file-system error, if it has one. */
export const fsErrorCode = (error: unknown): string | undefined =>
  typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined

const FS_REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'it does not exist',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'it is a folder',
  ENOTDIR: 'part of the path is a file, not a folder',
  EEXIST: 'it already exists',
  ENOSPC: 'no space left on the device',
  EROFS: 'the file system is read-only',
  ENAMETOOLONG: 'the name is too long',
  ELOOP: 'too many symbolic links',
  EMFILE: 'too many open files',
  EBUSY: 'the resource is busy'
}

/**
 * A short reason for a file-system error. Node's own messages quote the absolute host path,
 * which the model has no use for and which would leak the host layout into the trace.
 */
export const describeFsError = (error: unknown): string => {
  const code = fsErrorCode(error)
  return (code === undefined ? undefined : FS_REASONS[code]) ?? code ?? 'unexpected error'
}
