import { Data } from 'effect'

/** Every way a run can fail, as recorded in its trace (docs/cli.md, "Statuses and error kinds"). */
export const ErrorKind = {
  auth: 'auth',
  request: 'request',
  transient: 'transient',
  ceiling: 'ceiling',
  budget: 'budget',
  stalled: 'stalled',
  verification: 'verification',
  timeout: 'timeout',
  cancelled: 'cancelled',
  internal: 'internal'
} as const
export type ErrorKind = (typeof ErrorKind)[keyof typeof ErrorKind]

/** The kinds a provider call can fail with; only `transient` is worth another attempt. */
export type ProviderErrorKind = typeof ErrorKind.auth | typeof ErrorKind.request | typeof ErrorKind.transient

/**
 * A failed model call. `possiblyDelivered` marks failures where the provider may have done the
 * work anyway (network reset after sending, stream cut midway): the attempt settles `unknown`.
 */
export class ProviderError extends Data.TaggedError('ProviderError')<{
  readonly kind: ProviderErrorKind
  readonly message: string
  readonly provider: string
  readonly httpStatus?: number | undefined
  readonly retryAfterMs?: number | undefined
  readonly possiblyDelivered?: boolean | undefined
  readonly partialText?: string | undefined
  readonly cause?: unknown
}> {
  /** Transient failures may succeed on another attempt or another provider; auth and request never do. */
  get isRetryable(): boolean {
    return this.kind === ErrorKind.transient
  }
}

/** A task file or contract object that does not validate; `field` is the dotted path of the culprit. */
export class ContractError extends Data.TaggedError('ContractError')<{
  readonly message: string
  readonly field?: string | undefined
  readonly source?: string | undefined
}> {}

/** A path that would leave the workspace (`..`, absolute, or through a symlink). */
export class WorkspaceEscapeError extends Data.TaggedError('WorkspaceEscapeError')<{
  readonly path: string
  readonly message: string
}> {}

/**
 * A file tool's or a check's file-system call failed (ENOENT, EACCES, ...): `path` is the
 * workspace-relative path asked for, `code` Node's error code when it has one.
 */
export class FileSystemError extends Data.TaggedError('FileSystemError')<{
  readonly path: string
  readonly code: string | undefined
  readonly cause: unknown
}> {}

/** A command's process group could not be ended when its tool call was interrupted. */
export class ProcessGroupError extends Data.TaggedError('ProcessGroupError')<{
  readonly pgid: number | undefined
  readonly cause: unknown
}> {
  override get message(): string {
    return `cannot end process group ${this.pgid ?? '(none)'}: ${this.cause instanceof Error ? this.cause.message : String(this.cause)}`
  }
}

/** The workspace folder could not be created or resolved. */
export class WorkspaceError extends Data.TaggedError('WorkspaceError')<{
  readonly path: string
  readonly message: string
  readonly cause?: unknown
}> {}

/** The serialisable error a finished run carries in its context, its trace and `--json` output. */
export interface RunError {
  readonly kind: ErrorKind
  readonly message: string
  readonly httpStatus?: number | undefined
  readonly provider?: string | undefined
}

/** Flattens a provider error into the plain record a run keeps (no cause: causes may hold request data). */
export const runErrorFromProvider = (error: ProviderError): RunError => ({
  kind: error.kind,
  message: error.message,
  ...(error.httpStatus !== undefined ? { httpStatus: error.httpStatus } : {}),
  provider: error.provider
})
