import type { Effect } from 'effect/Effect'
import type { StoreError } from '../errors.js'
import type { Executor } from '../executor.js'
import { storeCall } from '../store-call.js'

/**
 * Extends every lease `owner` holds in one statement (a supervisor renews all of its runs at
 * once instead of one query per run). Returns how many it extended.
 */
export const renewLeasesOf = (db: Executor, owner: string, expiresAt: number): Effect<number, StoreError> =>
  storeCall(
    () => `renew the leases of ${owner}`,
    async () => {
      const result = await db.updateTable('runs').set({ lease_expires_at: expiresAt }).where('lease_owner', '=', owner).executeTakeFirst()
      return Number(result.numUpdatedRows)
    }
  )

/** Who holds each of these runs now and whether someone asked to cancel it. */
export interface LeaseState {
  readonly id: string
  readonly lease_owner: string | null
  readonly lease_token: number
  readonly cancel_requested_at: string | null
}

/** The lease state of the given runs (missing ids are simply absent), in chunks the drivers accept. */
export const leaseStates = (db: Executor, ids: ReadonlyArray<string>): Effect<LeaseState[], StoreError> =>
  storeCall(
    () => `read the leases of ${ids.length} runs`,
    async () => {
      const states: LeaseState[] = []
      for (let i = 0; i < ids.length; i += 500) {
        const chunk = ids.slice(i, i + 500)
        states.push(...(await db.selectFrom('runs').select(['id', 'lease_owner', 'lease_token', 'cancel_requested_at']).where('id', 'in', chunk).execute()))
      }
      return states
    }
  )
