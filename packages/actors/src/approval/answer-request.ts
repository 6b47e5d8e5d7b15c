import type { Database, DecisionSource, StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Kysely } from 'kysely'
import { RequestDecidedError } from '../errors.js'
import { query } from '../io/store-query.js'

/**
 * Records a person's answer to a question (`ask_human`, docs/policy.md, "Questions"): the request
 * becomes `approved` with resolution `answered` and the answer as its account. The first answer
 * wins: a question answered already is `RequestDecidedError`, and nothing changes.
 */
export const answerRequest = (
  db: Kysely<Database>,
  requestId: string,
  text: string,
  source: DecisionSource,
  at: string
): Effect.Effect<void, RequestDecidedError | StoreError> =>
  Effect.flatMap(
    query(`answer request ${requestId}`, () =>
      db
        .updateTable('approvals')
        .set({ status: 'approved', resolution: 'answered', account: text, source, decided_at: at })
        .where('id', '=', requestId)
        .where('status', '=', 'pending')
        .executeTakeFirst()
    ),
    (result) => (result.numUpdatedRows > 0n ? Effect.void : Effect.fail(new RequestDecidedError({ requestId, status: 'answered' })))
  )
