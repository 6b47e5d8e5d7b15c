import type { Wire } from './commit-wire.js'

/**
 * The messages between the main thread and the store's commit thread (commit-thread.ts, its
 * script commit-thread-worker.ts; docs/durability.md, "Group commit"). Every message is tagged,
 * and every request carries an id its reply repeats: a reply is matched to its request by that
 * id, never by its place in the order of replies.
 */

/** An error as it crosses from the thread: its message, and SQLite's code when it has one. */
export interface WireError {
  readonly message: string
  readonly code?: string
}

/** What the thread answers for one entry of a batch: null when it holds, the run whose lease was lost, or the error that rolled it back. */
export type WireOutcome = null | { readonly lost: string } | WireError

/** Commit a group commit's wire (commit-wire.ts `encodeGroup`) in one transaction. */
export interface CommitRequest {
  readonly _tag: 'Commit'
  readonly id: number
  readonly wire: Wire
}

/** Close the thread's connection and end the thread. */
export interface CloseRequest {
  readonly _tag: 'Close'
  readonly id: number
}

/** What the main thread sends the commit thread. */
export type ToCommitThread = CommitRequest | CloseRequest

/** A batch committed: an outcome per entry of its wire, in order. */
export interface CommittedReply {
  readonly _tag: 'Committed'
  readonly id: number
  readonly outcomes: ReadonlyArray<WireOutcome>
}

/** A batch of which nothing holds: the thread has no connection, or its transaction failed as a whole. */
export interface FailedReply {
  readonly _tag: 'Failed'
  readonly id: number
  readonly error: WireError
}

/** The connection closed: the thread ends next. */
export interface ClosedReply {
  readonly _tag: 'Closed'
  readonly id: number
}

/** What the commit thread answers. */
export type FromCommitThread = CommittedReply | FailedReply | ClosedReply

/** What the thread is started with. */
export interface CommitThreadData {
  readonly file: string
  readonly busyTimeoutMs: number
}
