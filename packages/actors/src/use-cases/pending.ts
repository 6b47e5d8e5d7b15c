import { type Database, getRunRow, listApprovals } from '@agentvisor/store'
import type { StoreError } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Kysely } from 'kysely'
import { RunNotFoundError } from '../errors.js'
import { type PendingRequest, pendingRequestOf } from '../approval/pending-request.js'

/** The requests `runId` waits on, in the order they are asked (step, then call position). */
export const pendingRequests = (db: Kysely<Database>, runId: string): Effect.Effect<PendingRequest[], RunNotFoundError | StoreError> =>
  Effect.gen(function* () {
    const run = yield* getRunRow(db, runId)
    if (run === undefined) return yield* new RunNotFoundError({ runId })
    const rows = yield* listApprovals(db, runId)
    return rows.filter((row) => row.status === 'pending').map(pendingRequestOf)
  })
