import { decodeRow, encodeText } from '../text-codec.js'
import type { LeaseAcquisition, LeaseRequest } from '../repositories/leases.repository.js'
import type { RawRunWriter } from '../run-writer/run-writer.js'
import type { NamedQueries } from './named-queries.js'

/** A run's lease on PostgreSQL: taken by a compare-and-set on its token, let go with the run's usage. */
export type PostgresLeases = Pick<RawRunWriter, 'acquireLease' | 'releaseLease'>

export const postgresLeases = ({ query, change }: NamedQueries): PostgresLeases => {
  const acquireLease = async (input: LeaseRequest): Promise<LeaseAcquisition | undefined> => {
    // The same decision as `acquireLease` (leases.repository.ts): a read, the decision in JS, a
    // compare-and-set on the token read.
    const [run] = await query<{ lease_owner: string | null; lease_expires_at: number | null; lease_token: number }>(
      'agentvisor_lease_read',
      'SELECT lease_owner, lease_expires_at, lease_token FROM runs WHERE id = $1',
      [encodeText(input.runId)]
    )
    if (run === undefined) return undefined
    decodeRow(run)
    const held = run.lease_owner !== null && run.lease_expires_at !== null && run.lease_expires_at > input.now
    if (held && run.lease_owner !== input.owner && !input.isAbandoned(run.lease_owner!)) {
      return { holder: { owner: run.lease_owner!, expiresAt: run.lease_expires_at! } }
    }
    const token = run.lease_token + 1
    const taken = await change(
      'agentvisor_lease_take',
      'UPDATE runs SET lease_owner = $1, lease_expires_at = $2, lease_token = $3 WHERE id = $4 AND lease_token = $5',
      [encodeText(input.owner), input.now + input.ttlMs, token, encodeText(input.runId), run.lease_token]
    )
    // Someone acquired it between our read and our write: they hold it now.
    if (taken === 0) return acquireLease(input)
    return { token }
  }

  return {
    acquireLease,
    releaseLease: async (runId, leaseToken, usageJson) => {
      await query(
        'agentvisor_lease_release',
        'UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL, usage_json = coalesce($3, usage_json) WHERE id = $1 AND lease_token = $2',
        [encodeText(runId), leaseToken, usageJson ?? null]
      )
    }
  }
}
