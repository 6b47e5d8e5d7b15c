import { Data } from 'effect'

/**
 * The store could not be opened, migrated or used. `message` names the file and, for a failed
 * migration, the migration; `cause` keeps the driver's error for logs.
 */
export class StoreError extends Data.TaggedError('StoreError')<{
  readonly message: string
  readonly cause?: unknown
}> {}
