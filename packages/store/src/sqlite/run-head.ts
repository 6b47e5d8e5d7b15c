import type BetterSqlite3 from 'better-sqlite3'
import { LeaseLostError } from '../errors.js'
import type { TransitionCommit } from '../run-writer/run-write.js'
import { decodeText, encodeText } from '../text-codec.js'
import { type BoundValue, textOrNull } from '../run-writer/bound-values.js'

/** A run's head on SQLite and the fence its writes are made under. */
export interface RunHead {
  /** The head's UPDATE from values as the store holds them (`status` null: left as it is), fenced by `leaseToken`; the rows it changed (0: the lease is lost). */
  readonly updateHeadRow: (
    status: BoundValue,
    state: BoundValue,
    steps: BoundValue,
    updatedAt: BoundValue,
    errorJson: BoundValue,
    endedAt: BoundValue,
    id: string,
    leaseToken: number
  ) => number
  /** The run's head from a commit's, fenced by its token; the rows it changed (0: the lease is lost). */
  readonly writeHead: (commit: Pick<TransitionCommit, 'runId' | 'leaseToken' | 'head'>) => number
  /** Throws LeaseLostError unless `id` (as stored: encoded) is leased under `leaseToken`. */
  readonly fence: (id: string, leaseToken: number) => void
}

/**
 * The run's head on `sqlite`: the fence (`lease_token`) and the columns a transition changes, with
 * its status only when that changed (it is indexed), as prepared statements; and the fence alone,
 * a read of the token, for a write that leaves the head as it is.
 */
export function runHead(sqlite: BetterSqlite3.Database): RunHead {
  const updateHead = sqlite.prepare('UPDATE runs SET state = ?, steps = ?, updated_at = ?, error_json = ?, ended_at = ? WHERE id = ? AND lease_token = ?')
  const updateHeadAndStatus = sqlite.prepare(
    'UPDATE runs SET status = ?, state = ?, steps = ?, updated_at = ?, error_json = ?, ended_at = ? WHERE id = ? AND lease_token = ?'
  )
  const updateHeadRow: RunHead['updateHeadRow'] = (status, state, steps, updatedAt, errorJson, endedAt, id, leaseToken) =>
    (status === null
      ? updateHead.run(state, steps, updatedAt, errorJson, endedAt, id, leaseToken)
      : updateHeadAndStatus.run(status, state, steps, updatedAt, errorJson, endedAt, id, leaseToken)
    ).changes
  const writeHead: RunHead['writeHead'] = ({ head, runId, leaseToken }) =>
    updateHeadRow(
      head.status ?? null,
      encodeText(head.state),
      head.steps,
      encodeText(head.updated_at),
      head.error_json,
      textOrNull(head.ended_at),
      encodeText(runId),
      leaseToken
    )
  const selectToken = sqlite.prepare('SELECT lease_token FROM runs WHERE id = ?').pluck()
  const fence: RunHead['fence'] = (id, leaseToken) => {
    if (selectToken.get(id) !== leaseToken) throw new LeaseLostError({ runId: decodeText(id) })
  }
  return { updateHeadRow, writeHead, fence }
}
