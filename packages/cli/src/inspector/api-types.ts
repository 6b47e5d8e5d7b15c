/**
 * The shapes of the inspector API's answers that have no other home. The page's modules
 * (packages/cli/inspector-page/) import them as types, with the run view's and the machine graph's.
 */

/** What `GET /api/info` answers. */
export interface InfoView {
  /** The store file the inspector reads. */
  readonly db: string
}

/** The one message of `GET /api/events`: these runs changed (docs/inspector.md, "Live updates"). */
export interface ChangedMessage {
  readonly type: 'changed'
  readonly runIds: ReadonlyArray<string>
}

/** Every refusal and failure: a one-line message. */
export interface ErrorBody {
  readonly error: string
}
