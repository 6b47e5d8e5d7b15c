import { answerApproval, type Database, type DecisionSource, type StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Kysely } from 'kysely'
import { RequestDecidedError } from '../errors.js'

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
  Effect.flatMap(answerApproval(db, requestId, text, source, at), (answered) =>
    answered ? Effect.void : Effect.fail(new RequestDecidedError({ requestId, status: 'answered' }))
  )
